"""tools/check_tests.py (issue 35): the static check of the test suite, on small sources.

Each rule has a snippet it must flag and a twin, one change away, that it must leave alone; the
opt-out comment, the helper and fixture resolution and the command line are checked the same way.
Nothing here imports or runs the snippets: the checker only reads them.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_tests", ROOT / "tools" / "check_tests.py")
assert _spec is not None and _spec.loader is not None
check_tests = importlib.util.module_from_spec(_spec)
sys.modules["check_tests"] = check_tests        # its dataclasses look their module up by name
_spec.loader.exec_module(check_tests)


def findings(source: str, path: str = "tests/test_snippet.py", **others: str) -> list[tuple[int, str]]:
    """(line, code) of each failing finding in `source`; `others` are more tests/ modules by stem."""
    sources = {path: textwrap.dedent(source), **{f"tests/{k}.py": textwrap.dedent(v) for k, v in others.items()}}
    report = check_tests.check_sources(sources, [path])
    return [(f.line, f.code) for f in report.findings]


def codes(source: str, path: str = "tests/test_snippet.py", **others: str) -> list[str]:
    return [code for _, code in findings(source, path, **others)]


# ------------------------------------------------------------------------------------ no-check
def test_a_test_without_any_check_is_flagged_at_its_def_line():
    src = """
        import pytest

        @pytest.mark.parametrize("x", [1])
        def test_runs(x):
            compute(x)
        """
    assert findings(src) == [(5, "no-check")]
    assert findings(src.replace("compute(x)", "assert compute(x) == 2")) == []


@pytest.mark.parametrize("check", [
    "with pytest.raises(ValueError):\n        compute(1)",
    "pytest.fail('never')",
    "raise AssertionError('no')",
    "np.testing.assert_array_equal(compute(1), [1])",
    "expect(page.locator('.x')).to_have_text('y')",
    "subprocess.run(['true'], check=True)",
])
def test_each_kind_of_check_counts(check: str):
    src = f"import subprocess\nimport pytest\n\ndef test_it(page):\n    {check}\n"
    assert codes(src) == []


@pytest.mark.parametrize("not_a_check", [
    "subprocess.run(['true'])",                   # the exit status is never read
    "page.wait_for_timeout(100)",
    "raise ValueError('setup')",                  # an error of the code under test, not a check
    "print(compute(1))",
])
def test_calls_that_check_nothing_do_not_count(not_a_check: str):
    src = f"import subprocess\n\ndef test_it(page):\n    {not_a_check}\n"
    assert "no-check" in codes(src)


def test_a_helper_that_asserts_counts_through_a_chain_and_one_that_does_not_is_seen_through():
    src = """
        def inner(x):
            assert x > 0

        def outer(x):
            inner(x)

        def quiet(x):
            return x

        def test_checked():
            outer(1)

        def test_unchecked():
            quiet(1)
        """
    assert findings(src) == [(14, "no-check")]


def test_a_recursive_helper_ends_and_decides_by_its_other_paths():
    src = textwrap.dedent("""
        def walk(n):
            if n:
                walk(n - 1)

        def test_walks():
            walk(3)
        """)
    assert codes(src) == ["no-check"]
    assert codes(src.replace("walk(n - 1)", "walk(n - 1)\n    assert n >= 0")) == []


def test_helpers_resolve_across_tests_modules_by_import_and_alias():
    helpers = """
        def check_page(page):
            assert page.title
        """
    by_name = "from helpers import check_page as check\n\ndef test_it(page):\n    check(page)\n"
    by_module = "import helpers\n\ndef test_it(page):\n    helpers.check_page(page)\n"
    assert codes(by_name, helpers=helpers) == [] and codes(by_module, helpers=helpers) == []
    # the same import of a helper that asserts nothing
    assert codes(by_name, helpers="def check_page(page):\n    return page\n") == ["no-check"]


def test_a_fixture_that_checks_counts_for_the_tests_that_use_it():
    conftest = """
        import pytest

        @pytest.fixture
        def page():
            errors = []
            yield errors
            assert not errors
        """
    src = """
        import pytest

        def test_uses(page):
            page.append(1)

        @pytest.mark.usefixtures("page")
        def test_uses_by_mark():
            print(1)
        """
    assert codes(src, conftest=conftest) == []
    assert codes(src, conftest=conftest.replace("assert not errors", "errors.clear()")) == ["no-check", "no-check"]


def test_nested_defs_and_methods_resolve_in_their_own_scope():
    src = """
        class TestThing:
            def _check(self, x):
                assert x

            def test_method(self):
                self._check(1)

        def test_nested():
            def inner():
                assert True
            inner()
        """
    assert codes(src) == []
    assert codes(src.replace("assert x", "return x").replace("assert True", "pass")) == ["no-check", "no-check"]


# --------------------------------------------------------------------------------- except-only
def test_a_check_only_in_an_except_handler_is_flagged_at_the_handler():
    src = """
        def test_error_message():
            try:
                load("[NaN]")
            except ValueError as e:
                assert "NaN" in str(e)
        """
    assert findings(src) == [(5, "except-only")]
    fixed = """
        import pytest

        def test_error_message():
            with pytest.raises(ValueError) as e:
                load("[NaN]")
            assert "NaN" in str(e.value)
        """
    assert findings(fixed) == []


def test_a_check_before_the_try_does_not_cover_the_path_where_nothing_raises():
    src = """
        def test_error_message():
            assert ready()
            try:
                load("[NaN]")
            except ValueError as e:
                assert "NaN" in str(e)
        """
    assert codes(src) == ["except-only"]


@pytest.mark.parametrize("no_raise_path", [
    "    else:\n        pytest.fail('no error')",               # the else says so
    "    assert False, 'no error'",                             # a check after the try
])
def test_a_check_on_the_path_where_nothing_raises_clears_it(no_raise_path: str):
    src = ("import pytest\n\ndef test_error_message():\n    try:\n        load('[NaN]')\n"
           "    except ValueError as e:\n        assert 'NaN' in str(e)\n" + no_raise_path + "\n")
    assert codes(src) == []


def test_either_outcome_checked_in_a_loop_is_not_flagged():
    src = """
        def test_every_case():
            for case in CASES:
                try:
                    got = expand(case)
                except WorkbenchError as e:
                    assert "line" in str(e)
                    continue
                assert got == oracle(case)
        """
    assert codes(src) == []


# ------------------------------------------------------------------------------------- or-true
@pytest.mark.parametrize("test", [
    "ok(x) or True",
    "ok(x) or 'the message'",                  # a message written as an `or` half
    "len(items) >= 0 or ok(x)",
    "0 <= len(items) or ok(x)",
    "ok(x) or r.text == r.text",
    "ok(x) or ok(x)",
    "flag and (isinstance(x, int) or True)",
    "not (ok(x) and False) or ok(y)",
])
def test_an_or_half_that_is_always_true_is_flagged(test: str):
    assert findings(f"def test_it():\n    assert {test}\n") == [(2, "or-true")]


@pytest.mark.parametrize("test", [
    "ok(x) or ok(y)",
    "x is None or x > 0",
    "len(items) >= 1 or ok(x)",
    "ok(x) or r.text == r.other",
])
def test_an_or_that_may_fail_is_listed_for_a_reader_only(test: str):
    report = check_tests.check_sources({"tests/test_snippet.py": f"def test_it():\n    assert {test}\n"})
    assert report.findings == []
    assert [(f.line, f.code, f.failing) for f in report.info] == [(2, "or-info", False)]


def test_an_or_that_picks_a_value_is_not_a_truth_test():
    report = check_tests.check_sources({"tests/test_snippet.py": "def test_it():\n    assert (name or 'x') == 'y'\n"})
    assert report.findings == [] and report.info == []


# --------------------------------------------------------------------------------- fixed-sleep
def test_a_fixed_sleep_in_browser_code_is_flagged():
    src = """
        import time

        def open_fresh(page):
            time.sleep(1.0)
            page.reload()
        """
    assert findings(src, "tests/test_snippet_browser.py") == [(5, "fixed-sleep")]
    assert findings(src, "tests/browser.py") == [(5, "fixed-sleep")]
    # a file that drives Playwright is browser code whatever its name
    assert findings("from playwright.sync_api import expect\n" + textwrap.dedent(src)) == [(6, "fixed-sleep")]
    # the same sleep in a test that has nothing to do with a browser is another matter
    assert findings(src) == []


def test_a_computed_settling_sleep_is_as_fixed_as_a_constant_one():
    src = """
        import time

        def settle(closed):
            time.sleep(max(0.0, closed + 1.5 - time.monotonic()))
        """
    assert codes(src, "tests/test_snippet_browser.py") == ["fixed-sleep"]


def test_wait_for_timeout_is_browser_code_wherever_it_is():
    assert findings("def test_it(page):\n    page.wait_for_timeout(500)\n    assert page\n") == [(2, "fixed-sleep")]


@pytest.mark.parametrize("loop", [
    "while not done():\n        time.sleep(0.1)",
    "while True:\n        if done():\n            break\n        time.sleep(0.1)",
    "for _ in range(50):\n        if done():\n            return\n        page.wait_for_timeout(100)",
    "while time.monotonic() < deadline:\n        try:\n            return connect()\n"
    "        except OSError:\n            time.sleep(0.25)",
])
def test_a_sleep_in_a_loop_that_polls_a_condition_is_allowed(loop: str):
    src = f"import time\n\ndef wait(page, done, deadline):\n    {loop}\n"
    assert codes(src, "tests/browser.py") == []


@pytest.mark.parametrize("loop", [
    "for _ in range(10):\n        time.sleep(0.1)",                              # ten sleeps are one sleep
    "while time.monotonic() < deadline:\n        time.sleep(0.1)",              # waits for the time alone
    "while True:\n        if time.monotonic() > deadline:\n            break\n        time.sleep(0.1)",
])
def test_a_loop_that_tests_only_the_clock_does_not_make_a_sleep_a_wait(loop: str):
    src = f"import time\n\ndef wait(page, deadline):\n    {loop}\n"
    assert codes(src, "tests/browser.py") == ["fixed-sleep"]


# ---------------------------------------------------------------------------------- wall-clock
@pytest.mark.parametrize("timing", [
    "t0 = time.monotonic()\n    run()\n    assert time.monotonic() - t0 < 1.0",
    "t0 = time.perf_counter()\n    run()\n    elapsed = time.perf_counter() - t0\n    assert elapsed < 1.0",
    "costs = []\n    for _ in range(3):\n        t0 = time.monotonic()\n        run()\n"
    "        costs.append(time.monotonic() - t0)\n    assert max(costs) < 0.2",
    "deadline = time.monotonic() + 5\n    run()\n    assert time.monotonic() < deadline",
    "t0 = time.time()\n    run()\n    assert 0.4 < time.time() - t0 < 2",
])
def test_an_assert_on_a_duration_is_flagged(timing: str):
    src = f"import time\n\ndef test_fast():\n    {timing}\n"
    assert codes(src) == ["wall-clock"]


def test_durations_are_followed_through_helpers_tuples_and_dataclass_fields():
    src = """
        import time
        from dataclasses import dataclass
        from time import perf_counter as clock

        @dataclass
        class Reply:
            status: int
            seconds: float

        def timed_get(cache):
            t0 = clock()
            got = cache.get()
            return got, clock() - t0

        def send(data):
            t0 = time.monotonic()
            return Reply(200, time.monotonic() - t0)

        def test_deadline(cache):
            got, took = timed_get(cache)
            assert got == (None, "miss")
            assert took < 2.0

        def test_reply():
            r = send(b"x")
            assert r.status == 200
            assert r.seconds < 15
        """
    assert findings(src) == [(23, "wall-clock"), (28, "wall-clock")]


@pytest.mark.parametrize("not_timing", [
    "deadline = time.monotonic() + 60\n    while not done():\n"
    "        assert time.monotonic() < deadline, 'timed out'\n        time.sleep(0.01)",   # a wait's time box
    "rec = record()\n    assert rec.timestamp >= time.time() - 5",                       # a timestamp's sanity
    "t0 = time.monotonic()\n    rec = run()\n    assert rec.count == 3",
])
def test_what_is_not_a_stopwatch_is_not_flagged(not_timing: str):
    src = f"import time\n\ndef test_it(done):\n    {not_timing}\n"
    assert codes(src) == []


# ------------------------------------------------------------------------------------ opt-outs
SLEEPY = """
    import time

    def open_fresh(page):
        time.sleep(1.0)   {comment}
    """


def test_an_opt_out_with_a_reason_silences_its_line_and_is_counted():
    src = textwrap.dedent(SLEEPY.format(comment="# check-tests: allow fixed-sleep the server has no event to wait on"))
    report = check_tests.check_sources({"tests/browser.py": src})
    assert report.findings == []
    assert [(a.line, a.code, a.reason) for a in report.opt_outs] == [
        (5, "fixed-sleep", "the server has no event to wait on")]


@pytest.mark.parametrize("comment", [
    "# check-tests: allow fixed-sleep",                 # no reason
    "# check-tests: allow slow-sleep it is fine",       # no such code
    "# check-tests: allow wall-clock the wrong code",   # allows nothing here; the sleep stays flagged
])
def test_a_bad_opt_out_is_itself_a_finding(comment: str):
    found = findings(SLEEPY.format(comment=comment), "tests/browser.py")
    assert (5, "bad-allow") in found and (5, "fixed-sleep") in found


def test_an_opt_out_nothing_needs_is_a_finding_and_one_in_a_string_is_not_an_opt_out():
    src = """
        def test_it():
            assert run() == 1   # check-tests: allow no-check kept from an old version
            text = "# check-tests: allow no-check in a string"
            assert text
        """
    assert findings(src) == [(3, "bad-allow")]


def test_an_opt_out_for_a_test_sits_on_its_def_line():
    src = """
        def test_import_only():   # check-tests: allow no-check importing it is the test (a crash fails it)
            import workbench
        """
    report = check_tests.check_sources({"tests/test_snippet.py": textwrap.dedent(src)})
    assert report.findings == [] and len(report.opt_outs) == 1


# -------------------------------------------------------------------------------- command line
def test_the_command_prints_file_line_code_and_exits_1_on_a_finding(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_bad.py").write_text("def test_it():\n    assert ok() or True\n\ndef test_none():\n    run()\n")
    (tmp_path / "test_good.py").write_text("def test_it():\n    assert ok() or maybe()\n")
    assert check_tests.main(["test_bad.py", "test_good.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["test_bad.py:2: or-true `True` is always true: this `or` can never fail",
                       "test_bad.py:4: no-check test_none checks nothing: no assert, pytest.raises, "
                       "or helper that asserts"]
    assert out[2] == ("check_tests: 2 files, 3 tests: 2 findings; 1 `assert ... or ...` for a reader (--info); "
                      "opt-outs: none")
    assert check_tests.main(["--info", "test_good.py"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["test_good.py:2: or-info assert ... or ...: ok() or maybe()",
                   "check_tests: 1 files, 1 tests: 0 findings; 1 `assert ... or ...` for a reader (--info); "
                   "opt-outs: none"]


def test_the_summary_counts_the_opt_outs_by_code_and_a_syntax_error_is_one_line(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "browser.py").write_text(
        "import time\n\ndef settle():\n    time.sleep(1)   # check-tests: allow fixed-sleep no event to wait on\n")
    assert check_tests.main(["browser.py"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("0 findings; 0 `assert ... or ...` for a reader "
                                                            "(--info); opt-outs: 1 fixed-sleep")
    (tmp_path / "test_broken.py").write_text("def test_it(:\n    pass\n")
    assert check_tests.main(["test_broken.py"]) == 1
    assert capsys.readouterr().out.startswith("test_broken.py:1: syntax-error ")
