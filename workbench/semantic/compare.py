"""Pairwise checks of two contexts' texts: what neither an embedding nor one side's fingerprint
can see, because it only shows when the two requests are laid side by side.

- `text_difference`: two near-identical messages that differ in a content word ("book a table for
  4" / "for 9", "restart the Redis pod" / "the Kafka pod");
- `reversals`: one asks for the opposite of the other ("add" / "remove", "freeze" / "unfreeze",
  "添加" / "删掉");
- `direction_reversed`: the same two things in the other order ("timestamp to date" / "date to
  timestamp", "从月付换到年付" / "从年付换到月付");
- `missing`: the cached request's content words that the new context does not mention at all —
  none missing means the new turn asks at least what the cached one asked (added background,
  a word-for-word repeat), the basis of a containment hit;
- `window_differences`: when the current messages are the same ("how do I reset it?"), the things
  the two windows name ("it" is a different device).

Content words: in English, words of three letters or more that are not function words (a crude
stem, so "deploys" matches "deploy"), numbers, and capitalised terms; in Chinese, character
bigrams of the CJK runs, since Chinese has no spaces and most words are two characters long.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .fingerprint import CJK, asking_clause, entities_of, normalise_numerals, question

FUNCTION_WORDS = frozenset(
    "the a an to of for in on at is are was were do does did i my me we our us you your it its this that these "
    "those and or but with how what which can could would should will please be been from by as so if just about "
    "there here then than also any some have has had get got make want need like know tell their they them he she "
    "his her im i'm i've i'd ok okay hi hello hey thanks thank sorry yes yeah yep not still again now way one "
    "really actually quick question anyway right well isn aren don doesn didn won wouldn shouldn couldn wasn "
    "weren haven hasn yup ugh lol haha hmm oh cool great awesome nice btw fyi tbh too very already even "
    "much through via using into onto before after during while".split())
ZH_STOP = frozenset("的了吗呢吧啊呀和与或在是我你他她它们这那个就都也还要想能可会怎么如何请问一下有没"
                    "把给被让么什哪儿多少几啥")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'./-]*[A-Za-z0-9]|[A-Za-z]|\d+(?:\.\d+)?|[\u4e00-\u9fff]+")
def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[:-len(suffix)]
    return w


@lru_cache(maxsize=4096)
def content(text: str) -> frozenset[str]:
    """The content words of a text (see the module docstring)."""
    out: set[str] = set()
    for m in _WORD.finditer(normalise_numerals(text)):
        t = m.group(0)
        if "\u4e00" <= t[0] <= "\u9fff":
            if len(t) == 1:
                if t not in ZH_STOP:
                    out.add(t)
                continue
            for a, b in zip(t, t[1:]):
                if not (a in ZH_STOP and b in ZH_STOP):
                    out.add(a + b)
            continue
        w = t.lower().strip("'.-/")
        if not w or w in FUNCTION_WORDS:
            continue
        if len(w) < 3 and not w[0].isdigit() and not t.isupper():
            continue
        out.add(_stem(w))
    return frozenset(out)


def coverage(entry_current: str, gone: frozenset[str]) -> float:
    """The share of the cached request's content words that the new context mentions, given those
    it does not (`missing`)."""
    asked = content(question(entry_current))
    return 1.0 - len(gone) / len(asked) if asked else 1.0


@lru_cache(maxsize=4096)
def units(text: str) -> frozenset[str]:
    """Content words, with Chinese taken character by character instead of in bigrams: a rewording
    keeps a word's characters more often than its bigrams ("团操课" / "团课", "撤销" / "撤回")."""
    out = {w for w in content(text) if not CJK.match(w)}
    out |= {c for c in normalise_numerals(text) if CJK.match(c) and c not in ZH_STOP}
    return frozenset(out)


def unit_coverage(entry_current: str, query_current: str, query_window: str) -> float:
    """`coverage` over `units`: the share of the cached request's words and Chinese characters that
    the new context mentions."""
    asked = units(question(entry_current))
    if not asked:
        return 1.0
    return 1.0 - len(asked - units(query_current) - units(query_window)) / len(asked)


def missing(entry_current: str, query_current: str, query_window: str) -> frozenset[str]:
    """The cached request's content words that the new context never mentions."""
    return content(question(entry_current)) - content(query_current) - content(query_window)


# --- near-identical messages ------------------------------------------------------------------------
# When the asking sentences overlap by DIFF_OVERLAP (Jaccard) or more, a differing content token (a
# number, a word of three letters or more that is not a function word, a Chinese character that is
# not a particle) forbids the hit. The price: a near-identical rewording that swaps one verb for a
# synonym ("switch on" / "turn on") misses too.
DIFF_OVERLAP = 0.5
_TOK = re.compile(r"[A-Za-z0-9_.$%'-]+|[\u4e00-\u9fff]")
_ENT = re.compile(r"(?<![.!?]\s)(?<!^)([A-Za-z0-9_.$%-]+)")


@lru_cache(maxsize=4096)
def _tokens(text: str) -> frozenset[str]:
    return frozenset({t.lower().split("'")[0].strip(".-") for t in _TOK.findall(normalise_numerals(text))} - {""})


@lru_cache(maxsize=4096)
def _entity_tokens(text: str) -> frozenset[str]:
    """Numbers, identifiers and capitalised words not at a sentence start ("How" is no name)."""
    text = normalise_numerals(text).strip()
    words = (w.rstrip(".") for w in _ENT.findall(text))          # "Camden." at a sentence's end is "Camden"
    return frozenset(w.lower() for w in words
                     if w and (re.search(r"\d", w) or w[:1].isupper() or re.search(r"[_/]|\w\.\w", w))
                     and w.lower() not in FUNCTION_WORDS)


def text_difference(query: str, entry: str, *, query_window: str = "") -> list[str]:
    """The content tokens that tell two near-identical requests apart (empty: not near-identical, or
    no content token differs). The asking sentences decide whether they are near-identical; then
    what the cached text says that the new one does not, and what the new one asks that the cached
    one does not, count; the new text's background does not ("my cat is the love of my life"), and
    what the new context's earlier turns name is not missing ("TurboTax" said two turns ago)."""
    qa, ea = _tokens(question(query)), _tokens(question(entry))
    if not qa or not ea or len(qa & ea) / len(qa | ea) < DIFF_OVERLAP:
        return []
    q, e, said = _tokens(query), _tokens(entry), _tokens(query_window)
    # what the new message adds counts in the clause that asks: "上周孩子乱按，童锁怎么解除？" adds
    # its background before the comma
    dropped, added_ = _content_tokens(e - q - said), _content_tokens(_tokens(asking_clause(query)) - e)
    named = ((_entity_tokens(entry) - _entity_tokens(query) - said)
             | (_entity_tokens(question(query)) - _entity_tokens(entry)))
    return sorted(dropped | added_ | named)      # "EU" / "US" count too


# Chinese characters that carry no content of their own: aspect and modal particles, adverbs of
# degree and time, measure words. A rewording changes them freely.
ZH_LIGHT = frozenset("着只嗯得到底快马上下就才都也还又再很太挺真最更啊呀吧呢嘛哦哈么了的地过给让被把将用从向对跟同"
                     "及以于而且但并或即便则所其此该每各某个些点一次能会可要想需应请已经刚正先后好")


def _content_tokens(tokens: frozenset[str]) -> set[str]:
    return {w for w in tokens if w not in FUNCTION_WORDS and w not in ZH_STOP and w not in ZH_LIGHT
            and (re.search(r"\d", w) or len(w) > 2 or re.fullmatch(r"[\u4e00-\u9fff]", w))}


def window_differences(a_window: str, b_window: str) -> list[str]:
    """What the two windows name differently: numbers, identifiers, names, ALL-CAPS terms, and Latin
    words inside Chinese text (product names)."""
    ea = entities_of(a_window) | _latin_in_chinese(a_window)
    eb = entities_of(b_window) | _latin_in_chinese(b_window)
    return sorted(ea ^ eb)


def _latin_in_chinese(text: str) -> frozenset[str]:
    if not CJK.search(text):
        return frozenset()
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.-]+", text)
                     if w.lower() not in ("user", "assistant"))


# --- opposite requests ------------------------------------------------------------------------------
OPPOSITES_EN = (("add", "remove"), ("add", "delete"), ("install", "uninstall"), ("increase", "decrease"),
                ("upgrade", "downgrade"), ("import", "export"), ("upload", "download"), ("include", "exclude"),
                ("join", "leave"), ("buy", "sell"), ("encrypt", "decrypt"), ("show", "hide"), ("allow", "block"),
                ("allow", "deny"), ("open", "close"), ("accept", "reject"), ("connect", "disconnect"),
                ("activate", "deactivate"), ("enable", "disable"), ("start", "stop"), ("raise", "lower"),
                ("expand", "collapse"), ("attach", "detach"), ("grant", "revoke"), ("archive", "restore"),
                ("lock", "unlock"), ("extend", "shorten"), ("merge", "split"), ("compress", "decompress"),
                ("before", "after"), ("remove", "restore"), ("delete", "restore"), ("erase", "restore"),
                ("delete", "recover"), ("remove", "bring back"), ("extend", "return"), ("renew", "return"),
                ("apply", "cancel"), ("send", "delete"), ("set up", "take off"), ("reset", "restore"),
                ("pick up", "drop off"), ("subscribe", "unsubscribe"), ("pause", "resume"))
OPPOSITES_ZH = (("添加", "删"), ("添加", "去掉"), ("加", "删"), ("加", "去掉"), ("加", "移除"), ("增加", "减少"),
                ("打开", "关闭"), ("开启", "关闭"), ("打开", "关掉"), ("开启", "关掉"), ("启用", "禁用"),
                ("开通", "取消"), ("开通", "关闭"), ("升级", "降级"), ("上传", "下载"), ("导入", "导出"),
                ("显示", "隐藏"), ("允许", "禁止"), ("加入", "退出"), ("冻结", "解冻"), ("锁定", "解锁"),
                ("安装", "卸载"), ("上线", "下线"), ("部署", "下线"), ("订阅", "退订"), ("绑定", "解绑"),
                ("压缩", "解压"), ("加密", "解密"), ("合并", "拆分"), ("延长", "缩短"), ("提前", "推迟"),
                ("办卡", "退卡"), ("开户", "销户"), ("注册", "注销"), ("之前", "之后"), ("以前", "以后"),
                ("打", "去掉"), ("买", "卖"), ("恢复", "删除"), ("恢复", "消除"), ("恢复", "擦掉"), ("恢复", "清除"),
                ("取件", "寄件"), ("取出", "放进"), ("续借", "归还"), ("续借", "还书"), ("报名", "缓学"),
                ("报名", "退出"))
_NEG_PREFIX = ("un", "dis", "de")


def _forms(root: str) -> str:
    stem = root[:-1] if root.endswith("e") else root
    return f"{root}|{root}s|{root}d|{root}ed|{stem}ing|{root}es|{stem}{stem[-1]}ed|{stem}{stem[-1]}ing"


# One pass over a text finds every antonym it uses: word form -> root.
_ROOT_OF = {form: root for pair in OPPOSITES_EN for root in pair for form in _forms(root).split("|")}
_OPP_WORDS = re.compile(r"\b(" + "|".join(sorted(_ROOT_OF, key=len, reverse=True)) + r")\b", re.I)


@lru_cache(maxsize=4096)
def _opposite_terms(text: str) -> frozenset[str]:
    asked = asking_clause(text)      # "擦掉了我朋友，怎么恢复回来？" asks to restore, not to erase
    found = {_ROOT_OF[m.group(1).lower()] for m in _OPP_WORDS.finditer(asked)}
    found |= {w for pair in OPPOSITES_ZH for w in pair if w in asked}
    return frozenset(found)


def reversals(a: str, b: str) -> list[str]:
    """Requests that ask for opposite things: an antonym pair, one on each side and not both on
    either; or a word and its un-/dis-/de- form ("freeze" / "unfreeze")."""
    out = []
    ta, tb = _opposite_terms(a), _opposite_terms(b)
    if ta or tb:
        for x, y in OPPOSITES_EN + OPPOSITES_ZH:
            ax, ay, bx, by = x in ta, y in ta, x in tb, y in tb
            if (ax and not ay and by and not bx) or (ay and not ax and bx and not by):
                out.append(f"{x} vs {y}")
    wa, wb = _latin_words(a), _latin_words(b)
    for one, other in ((wa, wb), (wb, wa)):
        for w in one:
            for p in _NEG_PREFIX:
                if w.startswith(p) and len(w) - len(p) >= 4 and w[len(p):] in other and w not in other:
                    out.append(f"{w[len(p):]} vs {w}")
    return sorted(set(out))


@lru_cache(maxsize=4096)
def _latin_words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in re.findall(r"[A-Za-z]{3,}", question(text)))


_DIR_EN = re.compile(r"\bfrom\s+(?:the\s+|a\s+|an\s+|my\s+|our\s+)?([\w.-]+(?:\s+[\w.-]+)?)\s+(?:in)?to\s+"
                     r"(?:the\s+|a\s+|an\s+|my\s+|our\s+)?([\w.-]+(?:\s+[\w.-]+)?)|"
                     r"\b(?:convert|turn|transform|cast|change|format|translate|switch)\w*\s+"
                     r"(?:the\s+|a\s+|an\s+|my\s+)?([\w.-]+(?:\s+[\w.-]+){0,2}?)\s+(?:in)?to\s+"
                     r"(?:the\s+|a\s+|an\s+)?([\w.-]+(?:\s+[\w.-]+){0,2})", re.I)
_DIR_ZH = re.compile(r"把\s*(.{1,20}?)\s*(?:转成|转换成|转换为|转为|转化为|改成|换成|变成|转到|迁到|迁移到|切到)"
                     r"\s*(.{1,20}?)(?=[，,。？?！!\s]|的|$)|"
                     r"从\s*(.{1,15}?)\s*(?:到|转到|切到|迁到|换到|改到|升到|降到)\s*(.{1,15}?)"
                     r"(?=[，,。？?！!\s]|$)")


_INSTEAD = re.compile(r"\b([\w.-]+(?:\s+[\w.-]+)?)\s+(?:instead of|rather than)\s+([\w.-]+(?:\s+[\w.-]+)?)", re.I)


@lru_cache(maxsize=4096)
def _direction(text: str) -> tuple[frozenset[str], frozenset[str]] | None:
    m = _INSTEAD.search(text)              # "blue instead of pink": from pink to blue
    if m and content(m.group(1)) and content(m.group(2)):
        return content(m.group(2)), content(m.group(1))
    for rx in (_DIR_EN, _DIR_ZH):
        m = rx.search(text)
        if m:
            g = [x for x in m.groups() if x is not None]
            src, dst = content(g[0]), content(g[1])
            if src and dst:
                return src, dst
    return None


def direction_reversed(a: str, b: str) -> bool:
    """The same two things in the other order: "A to B" on one side, "B to A" on the other."""
    da, db = _direction(a), _direction(b)
    if not da or not db:
        return False
    (sa, ta), (sb, tb) = da, db
    return bool(sa & tb) and bool(ta & sb) and not (sa & sb)


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


# --- the same thing, another kind of it ----------------------------------------------------------------
# "子女教育专项附加扣除" / "赡养老人专项附加扣除", "七天无理由退货" / "质量问题退货": the head (three
# characters or more) is the same, the two characters before it are not, share no character, and the
# cached ones are nowhere in the new context. A paraphrase rewords around the thing; it does not swap
# what kind of thing it is. Chinese only: in English the same test caught synonyms ("company VPN" /
# "corporate VPN", "bigleaf" / "mophead" hydrangeas) as often as swaps.
_ZH_MOD = re.compile(r"[\u4e00-\u9fff]{2}$")
# characters that glue a phrase together or ask, never a modifier
_GLUE = frozenset("的了吗呢吧啊呀和与或在是就都也还要想能可会把给被让这那个我你他她它们有没说怎么如何")


def modifier_swaps(query_current: str, query_window: str, entry_current: str) -> list[str]:
    """(cached "m h", new "m' h") pairs in Chinese text: see above."""
    new: _Grams | None = None
    out = []
    for run in re.findall(r"[\u4e00-\u9fff]{5,}", question(entry_current)):
        new = new or _Grams(f"{query_current}\n{query_window}")
        for cut in range(2, len(run) - 2):
            mod = run[cut - 2:cut]
            heads = [run[cut:cut + n] for n in (5, 4, 3) if cut + n <= len(run) and run[cut:cut + n] in new]
            if not heads or any(c in _GLUE for c in mod) or mod in new:
                continue
            other = new.modifier_before(heads[0])
            if other and not any(c in _GLUE for c in other) and not set(other) & set(mod):
                out.append(f"{mod}{heads[0]} / {other}{heads[0]}")
    return sorted(set(out))


class _Grams:
    """Where each Chinese 2- to 5-gram of a text starts, built once: a lookup per cut of the cached
    request, not a search of the whole text (that was quadratic for long texts)."""

    def __init__(self, text: str):
        self.text = text
        self.at: dict[str, list[int]] = {}
        for m in re.finditer(r"[\u4e00-\u9fff]{2,}", text):
            for k in range(2, 6):
                for i in range(m.start(), m.end() - k + 1):
                    self.at.setdefault(text[i:i + k], []).append(i)
        self._before: dict[str, str | None] = {}

    def __contains__(self, gram: str) -> bool:
        return gram in self.at

    def modifier_before(self, head: str) -> str | None:
        """The two Chinese characters right before the first occurrence of `head` that has them,
        occurrences taken left to right without overlap (as a regular-expression scan finds them)."""
        if head not in self._before:
            found, end = None, -1
            for at in self.at.get(head, ()):
                if at < end:
                    continue                       # overlaps the occurrence before
                end = at + len(head)
                if at >= 2 and _ZH_MOD.fullmatch(self.text[at - 2:at]):
                    found = self.text[at - 2:at]
                    break
            self._before[head] = found
        return self._before[head]


# --- "not X, it's Y" ------------------------------------------------------------------------------
# A user who says which thing they do NOT mean ("我们家的不是海尔的，是小天鹅", "not the Haier one, a
# Little Swan") rules out a cached answer about that thing, even though the new context names it.
_NOT_EN = re.compile(r"\b(?i:not|isn't|isn’t|wasn't|aren't)\s+(?:(?i:a|an|the|my|our)\s+)?(?:"
                     r"([\w.-]+(?:\s+[\w.-]+)?)\s*(?:one\s*)?[,;—-]+\s*(?i:it's|it is|but|rather|a|an|the|just)\b|"
                     r"([A-Z][\w.-]+(?:\s+[A-Z][\w.-]+)*)\b)")
_NOT_ZH = re.compile(r"(?:不是|并非|而不是)\s*([\u4e00-\u9fffA-Za-z0-9]{2,8}?)(?:的|那个|那台|这个)?\s*[，,、；;]\s*"
                     r"(?:是|而是|用的是|我们是)")


# ... and one who says they moved away from it ("we switched from Zoom to Teams", "从海尔换成了小天鹅")
_LEFT_EN = re.compile(r"\b(?:switched|moved|changed|migrated|went|upgraded|downgraded)\s+(?:over\s+)?from\s+"
                      r"(?:the\s+|a\s+|an\s+|my\s+|our\s+)?([\w.-]+(?:\s+[\w.-]+)?)\s+(?:to|over to)\b", re.I)
_LEFT_ZH = re.compile(r"从\s*([\u4e00-\u9fffA-Za-z0-9]{2,8}?)\s*(?:换成|换到|改成|改用|转到|迁到|搬到|切到)")


def _said_in(word: str, low: str, runs: set[str]) -> bool:
    """`word` stands in `low` as a whole word (as the regular expression \\bword\\b finds it)."""
    if re.fullmatch(r"\w+", word):
        return word in runs
    return word in low and bool(re.search(rf"\b{re.escape(word)}\b", low))


def ruled_out(query_current: str, query_window: str, entry_current: str) -> list[str]:
    """What the new context says it does not mean (or no longer uses), that the cached request asks
    about."""
    new = f"{query_current}\n{query_window}"
    cached = question(entry_current)
    said = [g for rx in (_NOT_EN, _NOT_ZH, _LEFT_EN, _LEFT_ZH) for m in rx.finditer(new) for g in m.groups() if g]
    low = cached.lower()
    runs = set(re.findall(r"\w+", low))      # a word of letters is said when it is one of these runs
    words = {w for x in said if not CJK.search(x) for w in x.lower().split()
             if len(w) >= 3 and w not in FUNCTION_WORDS}
    # each distinct word once, by set lookup: a hostile text of many "not X" must stay linear
    out = {w for w in words if _said_in(w, low, runs)}
    return sorted(out | {x for x in said if CJK.search(x) and len(x) >= 2 and x[:2] in cached})


# --- undoing it -----------------------------------------------------------------------------------------
# "someone set it to double-sided; how do I change it back?": a request to undo, when the cached
# request does not ask to undo, asks for the opposite of what was done.
_UNDO = re.compile(r"\b(?:back to|(?:change|set|switch|turn|put|get)\s+(?:it|them|this|that)\s+back|revert|undo|"
                   r"roll\s*back)\b|改回|调回|变回|换回|恢复成|恢复到|撤销", re.I)


def undoes(query_current: str, entry_current: str) -> bool:
    return bool(_UNDO.search(question(query_current))) and not _UNDO.search(question(entry_current))


# --- a follow-up to the cached question ----------------------------------------------------------------
# The new conversation already asked the cached question (a user turn of its window says it) and got
# an answer; its current message asks on from there ("we'd prefer a school out of our zone: how?").
FOLLOW_UP_COVER = 0.8
REASK_COVER = 0.5


def follows_up(query_current: str, window_user_turns: list[str], entry_current: str) -> bool:
    asked = content(question(entry_current))
    if not asked or not window_user_turns:
        return False
    if len(asked & content(question(query_current))) / len(asked) >= REASK_COVER:
        return False                                       # the current message asks it again
    return any(len(asked & content(t)) / len(asked) >= FOLLOW_UP_COVER for t in window_user_turns)


def pair_vetoes(query: tuple[str, str], entry: tuple[str, str]) -> list[str]:
    """Everything laid side by side that forbids a hit: (current, window) of each context."""
    (qc, qw), (ec, ew) = query, entry
    out = []
    diff = text_difference(qc, ec, query_window=qw)
    if diff:
        out.append(f"worded almost alike, they differ in {', '.join(f'“{w}”' for w in diff[:4])}")
    elif qw and ew and _same(question(qc), question(ec)):     # "it's there now. how do I open the locker?"
        named = window_differences(qw, ew) or text_difference(qw, ew)
        if named:
            out.append(f"the same message, but the earlier turns name different things: "
                       f"{', '.join(f'“{w}”' for w in named[:4])}")
    opposite = reversals(qc, ec)
    if opposite:
        out.append(f"they ask for opposite things ({', '.join(o.replace(' vs ', ' and ') for o in opposite[:3])})")
    if follows_up(qc, [line[6:] for line in qw.split("\n") if line.startswith("user: ")], ec):
        out.append("the new conversation already asked the cached question; its message asks on from the answer")
    if undoes(qc, ec):
        out.append("the new question asks to undo something; the cached one does not")
    excluded = ruled_out(qc, qw, ec)
    if excluded:
        out.append(f"the new conversation says it is not about {', '.join(f'“{w}”' for w in excluded[:3])}")
    swaps = modifier_swaps(qc, qw, ec)
    if swaps:
        out.append(f"the same thing, another kind of it: {', '.join(swaps[:3])}")
    if direction_reversed(qc, ec):
        out.append("they name the same things in the other order (from one to the other, and back)")
    return out
