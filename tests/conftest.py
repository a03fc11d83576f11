import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/ helpers (oracles, corpus, browser) import as top-level modules
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Redis entries are signed: one secret for the whole run (and the processes it starts), so no test
# writes a deployment secret into the user's own workbench folder. Tests of the default unset it.
os.environ.setdefault("WORKBENCH_CACHE_SECRET", "prompt-workbench-tests-not-a-real-secret")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """The system Chromium, headless, driven by Playwright (tests/browser.py says which binary). A
    missing part is a failure that says what to install, never a skip."""
    from browser import find_chromium, launch_args

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("pip install playwright (the test extra)")
    chromium = find_chromium()
    if chromium is None:
        pytest.fail("no system Chromium: apt-get install chromium (or set WORKBENCH_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def own_workbench_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """WORKBENCH_HOME in a folder of the module's own (the model packages assemble there), restored after."""
    old = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_HOME", None)
        else:
            os.environ["WORKBENCH_HOME"] = old
