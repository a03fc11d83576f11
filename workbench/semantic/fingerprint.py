"""The structured fingerprint of a turn, by deterministic rules (English and Chinese): what the
embedding alone cannot tell apart.

- `action`: the kind of request (enable, disable, create, delete, deploy, migrate, compare, explain,
  howto, fix, ...), from verb lists;
- `entities`: numbers with the word they count ("2 instances" vs "2 requests", "2 个实例"),
  identifiers (snake_case, CamelCase, dotted, paths, versions, quoted strings), names (capitalised
  words not at a sentence start), and single-letter option names ("option A");
- `negated`: a negation that governs the request ("do not", "never", "不要", "别", "禁止");
- `correction`: the user corrects the conversation ("no, use B instead", "不对，改用 B") — the
  cache invalidates the session's entries on it.

Two fingerprints agree when action, negation and entities are all equal. The rules are small on
purpose: each list says what it matches, and the evaluation set checks them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACTIONS: dict[str, tuple[str, ...]] = {
    "disable": ("disable", "turn off", "switch off", "deactivate", "stop", "关闭", "停用", "禁用", "关掉", "停止"),
    "enable": ("enable", "turn on", "switch on", "activate", "start", "打开", "开启", "启用", "启动", "开通"),
    "delete": ("delete", "remove", "drop", "uninstall", "cancel", "删除", "移除", "卸载", "取消", "删掉"),
    "create": ("create", "add", "make", "set up", "new", "install", "创建", "新建", "添加", "安装", "新增"),
    "migrate": ("migrate", "move", "transfer", "port", "迁移", "搬迁", "转移"),
    "deploy": ("deploy", "release", "ship", "roll out", "publish", "部署", "上线", "发布"),
    "update": ("update", "upgrade", "change", "modify", "edit", "rename", "更新", "升级", "修改", "更改", "改成"),
    "compare": ("compare", "difference", " vs ", "versus", "better", "比较", "区别", "对比", "哪个好"),
    "fix": ("fix", "debug", "fails", "failing", "broken", "crash", "修复", "报错", "出错", "失败", "解决"),
    "price": ("price", "cost", "how much", "pricing", "价格", "多少钱", "费用", "收费"),
    "explain": ("explain", "what is", "what's", "why", "meaning", "解释", "是什么", "为什么", "什么意思"),
    "howto": ("how do", "how to", "how can", "steps", "怎么", "如何", "怎样", "步骤"),
}
# Negation that governs a request ("don't enable", "never", "stop"), not every "not" or "without"
# ("rotate without downtime" asks for the same thing as "zero-downtime rotation").
WEAK_ACTIONS = {"", "howto", "explain"}
NEGATION_EN = re.compile(r"\b(?:don't|do not|dont|never|stop|no longer|shouldn't|should not|mustn't|must not|"
                         r"avoid|refrain from|prevent)\b", re.I)
NEGATION_ZH = re.compile(r"不要|(?<![级区特类分差个告识性辨鉴派告])别(?![人的])|不用|无需|不需要|禁止|不想|勿|停止|取消|不再|不许|不准|不让")
# A correction changes what the conversation has established: "No, ...", "that's wrong", "I meant",
# "use B instead", "scratch that", "算了", "改用", "我是说". Kept narrow: a false positive only costs
# the session's cache, but "instead" or "不是" alone are far too common to count.
CORRECTION_EN = re.compile(r"^\s*(?:no|nope)\s*[,.!]|\b(?:that's|that is|you're|you are|this is)\s+"
                           r"(?:wrong|incorrect|not (?:right|correct|what i))|\b(?:i|what i) meant\b|"
                           r"\bnot what i (?:asked|meant|wanted)\b|\b(?:use|go with|switch to|try|do|make it)\b"
                           r"[^.?!]{0,40}\binstead\b|\bscratch that\b|\bnever ?mind\b|\bforget (?:that|it)\b|"
                           r"^\s*actually,?\s+(?:i|it|it's|we|use|make|the|that)\b|\bcorrection:", re.I)
CORRECTION_ZH = re.compile(r"不对|不是这样|不是这个|不是我要的|算了|改用|改成|我是说|我的意思是|换成|搞错|弄错|错了|更正")
# A number and what it counts: the next word that is not filler ("2 concurrent instances" ->
# "2 instance"); a unit right after it ("5 GB", "30%") is kept; "$500" is "500 dollar". Chinese:
# after a counting measure word (个, 台, 位, ...) the noun up to a particle ("2 个并发实例" ->
# "2 并发实例"); after a unit (号, 月, 天, 元, ...) the unit alone.
NUMBER_UNIT = re.compile(r"[$€£¥]?(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B\b|ms\b|个|台|次|条|份|位|张|块|号|月|日|天|年|点|元|"
                         r"小时|分钟|秒)?\s*((?:[A-Za-z][A-Za-z-]*\s+){0,2}[A-Za-z][A-Za-z-]*|[\u4e00-\u9fff]{1,4})?")
COUNTERS = set("个台次条份位张")
PARTICLES = re.compile(r"[的了吗呢吧和与或在到入就都也还要想能可会让给把被]")
CURRENCY = {"$": "dollar", "€": "euro", "£": "pound", "¥": "yuan"}
FILLER = {"of", "to", "the", "a", "an", "more", "concurrent", "new", "extra", "additional", "different", "separate",
          "parallel", "more", "other", "big", "small", "large", "in", "on", "at", "for", "per", "and", "or", "with",
          "simultaneous", "identical", "same"}
IDENT = re.compile(r"`([^`]+)`|\"([^\"]{1,60})\"|'([^']{2,60})'|"
                   r"\b([A-Za-z_][A-Za-z0-9]*(?:[_./:-][A-Za-z0-9]+)+)\b|\b([a-z]+[A-Z][A-Za-z0-9]+)\b|"
                   r"\b(v?\d+(?:\.\d+){1,3})\b")
OPTION = re.compile(r"(?:\b(?i:option|plan|feature|mode|method|approach|service|server|region|tier)\s+"
                    r"([A-Z0-9][\w-]*)\b)|(?:(?:方案|功能|选项|模式|服务|套餐|版本)\s*([A-Za-z0-9]+))|"
                    r"(?:([A-Za-z0-9]+)\s*(?:方案|功能|选项|模式|服务|套餐|版本))|(?:(?<![\w'-])([A-HJ-Z])(?![\w'-]))")
NAME = re.compile(r"(?<![.!?]\s)(?<!^)(?<![-_./])\b([A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})*)\b")
ALLCAPS = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,}(?![\w-])")     # ERROR, API, EU, S3
TURN_ON_OFF = re.compile(r"\b(?:turn|switch|flip)(?:s|ed|ing)?\b[^.?!]{0,30}?\b(on|off)\b", re.I)
STOP_NAMES = {"The", "This", "That", "What", "How", "Can", "Could", "Would", "Should", "Please", "Thanks", "Yes",
              "No", "Also", "And", "But", "Then", "Which", "Why", "When", "Where", "Who", "Is", "Are", "Do", "Does",
              "It", "My", "Our", "Your", "We", "You", "They", "If", "Ok", "Okay", "Hi", "Hello", "Let", "For"}


@dataclass(frozen=True)
class Fingerprint:
    action: str                        # "" when no rule matched
    entities: frozenset[str]
    negated: bool
    correction: bool

    def agrees(self, other: "Fingerprint") -> bool:
        """Same request: no veto, the same action (or one names none), and names and identifiers
        that overlap by at least a third when both have some (paraphrases drop or add incidental
        ones)."""
        if self.vetoes(other):
            return False
        # "how do I" and "what is" are question forms, not intents: they agree with any action
        strong = {self.action, other.action} - WEAK_ACTIONS
        if len(strong) > 1:
            return False
        a = {e for e in self.entities if not e[:1].isdigit()}
        b = {e for e in other.entities if not e[:1].isdigit()}
        return not (a and b and len(a & b) / len(a | b) < 1 / 3)

    def vetoes(self, other: "Fingerprint") -> list[str]:
        """Differences that forbid a hit at any similarity: a flipped negation ("turn A on" / "do not
        turn A on"), opposite on/off actions, or different counted things ("2 instances" / "2
        requests"). Embeddings put these pairs close together; no threshold separates them."""
        out = []
        if self.negated != other.negated:
            out.append("negation flipped")
        if {self.action, other.action} == {"enable", "disable"}:
            out.append("enable vs disable")
        nums_a, nums_b = _counted(self.entities), _counted(other.entities)
        if nums_a and nums_b:
            if set(nums_a) != set(nums_b):
                out.append(f"numbers {sorted(nums_a)} vs {sorted(nums_b)}")
            else:
                clash = [n for n in nums_a if nums_a[n] and nums_b[n] and not nums_a[n] & nums_b[n]]
                if clash:
                    out.append("counted things differ: " + ", ".join(
                        f"{n} {sorted(nums_a[n])} vs {sorted(nums_b[n])}" for n in clash))
        return out

    def differences(self, other: "Fingerprint") -> list[str]:
        out = []
        if self.action != other.action:
            out.append(f"action {self.action or '-'} vs {other.action or '-'}")
        if self.negated != other.negated:
            out.append(f"negation {self.negated} vs {other.negated}")
        if self.entities != other.entities:
            only_a, only_b = sorted(self.entities - other.entities), sorted(other.entities - self.entities)
            out.append(f"entities {only_a} vs {only_b}")
        return out

    def to_json(self) -> dict:
        return {"action": self.action, "entities": sorted(self.entities), "negated": self.negated,
                "correction": self.correction}

    @classmethod
    def from_json(cls, d: dict) -> "Fingerprint":
        return cls(d.get("action", ""), frozenset(d.get("entities", ())), bool(d.get("negated")),
                   bool(d.get("correction")))


def action_of(text: str) -> str:
    m = TURN_ON_OFF.search(text)          # "turn A on": the object sits inside the verb
    if m:
        return "enable" if m.group(1).lower() == "on" else "disable"
    low = f" {text.lower()} "
    # the most specific verb wins: the first category in ACTIONS's order with a match
    for name, words in ACTIONS.items():
        for w in words:
            if (w.isascii() and re.search(rf"(?<![a-z]){re.escape(w.strip())}(?![a-z])", low)) or \
                    (not w.isascii() and w in low):
                return name
    return ""


def entities_of(text: str) -> frozenset[str]:
    out: set[str] = set()
    for m in NUMBER_UNIT.finditer(text):
        num, unit, words = m.group(1), m.group(2) or "", (m.group(3) or "")
        sign = text[m.start()] if text[m.start()] in CURRENCY else ""
        if sign:
            out.add(f"{num} {CURRENCY[sign]}")
            continue
        if unit and unit not in COUNTERS:
            out.add(f"{num} {unit.lower()}")
            continue
        if words and re.fullmatch(r"[\u4e00-\u9fff]+", words):
            out.add(f"{num} {PARTICLES.split(words)[0]}".strip() if unit else num)
            continue
        noun = next((w for w in words.lower().split() if w not in FILLER), "")
        noun = {"dollars": "dollar", "bucks": "dollar", "usd": "dollar", "euros": "euro", "eur": "euro"}.get(noun, noun)
        out.add(f"{num} {_singular(noun)}".strip())
    for m in IDENT.finditer(text):
        val = next(g for g in m.groups() if g)
        if not re.fullmatch(r"\d+(?:\.\d+)?", val):
            out.add(val.lower())
    for m in OPTION.finditer(text):
        val = next((g for g in m.groups() if g), None)
        if val and (len(val) > 1 or val.isupper()):
            out.add(f"#{val.upper()}")
    for m in ALLCAPS.finditer(text):
        out.add(m.group(0).lower())
    for m in NAME.finditer(text):
        if m.group(1) not in STOP_NAMES:
            out.add(m.group(1).lower())
    return frozenset(out)


def _counted(entities: frozenset[str]) -> dict[str, set[str]]:
    """number -> the things it counts (empty: a bare number)."""
    out: dict[str, set[str]] = {}
    for e in entities:
        if e[:1].isdigit():
            num, _, noun = e.partition(" ")
            out.setdefault(num, set())
            if noun:
                out[num].add(noun)
    return out


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 and word.isascii() else word


def negated(text: str) -> bool:
    if NEGATION_EN.search(text):
        return True
    # Chinese 不 is negation in most positions, but not in fixed words that are not negations.
    cleaned = re.sub(r"不对|不错|不过|不同|不断|不久|不少|不如|不管|是不是|能不能|要不要|可不可以|会不会|对不对|好不好", "", text)
    return bool(NEGATION_ZH.search(cleaned))


def is_correction(text: str) -> bool:
    return bool(CORRECTION_EN.search(text) or CORRECTION_ZH.search(text))


def fingerprint(text: str) -> Fingerprint:
    """The fingerprint of the current user turn (the context window adds meaning to the vector,
    not to these fields: "it" does not name an entity)."""
    return Fingerprint(action_of(text), entities_of(text), negated(text), is_correction(text))


# --- the pairwise text check -----------------------------------------------------------------------
# Two near-identical messages that differ in a content word are the near-misses embeddings cannot
# separate: "book a table for 4" / "for 9", "restart the Redis pod" / "the Kafka pod". When the
# word overlap is high (Jaccard >= DIFF_OVERLAP), a differing content token (a number, a word of
# three letters or more that is not a function word, a Chinese character that is not a particle)
# forbids the hit. The price: a near-identical rewording that swaps one verb for a synonym ("switch
# on" / "turn on") misses too (measured on the labelled set: precision 0.75 with it against 0.62
# with entity-like tokens only). A rewording has a low overlap and is left to the similarity and fingerprints.
# Between the windows (when the current messages are the same) only entity-like tokens count:
# numbers, capitalised words, identifiers.
DIFF_OVERLAP = 0.5
_TOK = re.compile(r"[A-Za-z0-9_.$%-]+|[\u4e00-\u9fff]")
_ENT = re.compile(r"[A-Za-z0-9_.$%-]+")
FUNCTION_WORDS = set("the a an to of for in on at is are was were do does did i my me we our us you your it its this "
                     "that these those and or but with how what which can could would should will please be been "
                     "from by as so if just about there here then than also any some".split()) | \
    set("的了吗呢吧啊呀和与或在是我你他她它们这那个就都也还要想能可会怎么如何请问一下有没")


def _tokens(text: str) -> set[str]:
    return {t.lower().strip(".-") for t in _TOK.findall(text)} - {""}


def _entity_tokens(text: str) -> set[str]:
    return {w.lower() for w in _ENT.findall(text)
            if re.search(r"\d", w) or w[:1].isupper() or re.search(r"[_/]|\w\.\w", w)}


def text_difference(a: str, b: str, *, entities_only: bool = False) -> list[str]:
    """The content tokens that tell two near-identical texts apart (empty: not near-identical, or
    no content token differs)."""
    ta, tb = _tokens(a), _tokens(b)
    if not ta or not tb or len(ta & tb) / len(ta | tb) < DIFF_OVERLAP:
        return []
    if entities_only:
        return sorted(_entity_tokens(a) ^ _entity_tokens(b))
    words = {w for w in (ta ^ tb) - FUNCTION_WORDS
             if re.search(r"\d", w) or len(w) > 2 or re.fullmatch(r"[\u4e00-\u9fff]", w)}
    return sorted(words | (_entity_tokens(a) ^ _entity_tokens(b)))      # "EU" / "US" count too
