"""The structured fingerprint of a turn, by deterministic rules (English and Chinese): what the
embedding alone cannot tell apart.

- `action`: the kind of request (enable, disable, create, delete, deploy, migrate, compare, explain,
  howto, fix, ...), from verb lists;
- `entities`: numbers with the word they count ("2 instances" vs "2 requests", "2 个实例"),
  identifiers (snake_case, CamelCase, dotted, paths, versions, quoted strings), names (capitalised
  words not at a sentence start), and single-letter option names ("option A");
- `negated`: a negation that governs the request ("do not", "never", "不要", "别", "禁止");
- `correction`: the user corrects the conversation ("no, use B instead", "不对，改用 B") — the
  cache invalidates the session's entries on it;
- `asks`: the kind of answer wanted (place, time, person, cost, amount, reason; empty for "how do I").

Action, negation and asks are read from the sentences that ask (`question`), not the background.
Two fingerprints agree when nothing vetoes them, their strong actions are the same and their names
overlap by a third. The rules are small on purpose: each list says what it matches, and the
labelled sets check them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

ACTIONS: dict[str, tuple[str, ...]] = {
    "disable": ("disable", "turn off", "switch off", "deactivate", "stop", "关闭", "停用", "禁用", "关掉", "停止",
                "关了", "怎么关", "关上"),
    "enable": ("enable", "turn on", "switch on", "activate", "start", "打开", "开启", "启用", "启动", "开通"),
    "delete": ("delete", "remove", "drop", "uninstall", "cancel", "删除", "移除", "卸载", "取消", "删掉"),
    "create": ("create", "add", "set up", "install", "创建", "新建", "添加", "安装", "新增"),
    "migrate": ("migrate", "move", "transfer", "port", "迁移", "搬迁", "转移"),
    "deploy": ("deploy", "release", "ship", "roll out", "publish", "部署", "上线", "发布"),
    "update": ("update", "upgrade", "change", "modify", "edit", "rename", "更新", "升级", "修改", "更改", "改成"),
    "compare": ("compare", "difference", " vs ", "versus", "better", "比较一下", "相比", "区别", "对比", "哪个好"),
    "fix": ("fix", "debug", "fails", "failing", "broken", "crash", "修复", "报错", "出错", "失败", "解决"),
    "price": ("price", "cost", "how much", "pricing", "价格", "多少钱", "费用", "收费"),
    "explain": ("explain", "what is", "what's", "why", "meaning", "解释", "是什么", "为什么", "什么意思"),
    "howto": ("how do", "how to", "how can", "steps", "怎么", "如何", "怎样", "步骤"),
}
# Negation that governs a request ("don't enable", "never", "stop"), not every "not" or "without"
# ("rotate without downtime" asks for the same thing as "zero-downtime rotation").
WEAK_ACTIONS = {"", "howto", "explain"}
CJK = re.compile(r"[\u4e00-\u9fff]")
OPPOSITE_ACTIONS = ({"enable", "disable"}, {"create", "delete"})
POLAR_ACTIONS = {"enable", "disable", "create", "delete"}
# What kind of answer a question wants. Two questions after different kinds ("where are the deploy
# logs" / "how long does a deploy take") are different questions however close their words are.
# "when", "who" count only where they ask (at the start of a clause), not as conjunctions.
_CLAUSE = r"(?:^|[,;:]\s*|\b(?:and|so|but|then|ok|okay|also)\s+)"
ASPECTS: dict[str, re.Pattern[str]] = {
    "place": re.compile(r"\bwhere\b|在哪|哪里|哪儿|什么地方|哪个地方", re.I),
    "time": re.compile(_CLAUSE + r"when\b|\bwhen (?:will|can|do|does|did|is|are|should|would|must)\b|\bhow long\b|"
                       r"\bwhat time\b|\bhow soon\b|\bdeadline\b|\blast day\b|\bby when\b|多久|什么时候|哪天|几点|"
                       r"多长时间|最晚|最早|截止|几号|何时", re.I),
    "person": re.compile(_CLAUSE + r"who\b|\bwhom\b|\bwho (?:needs|should|can|must|will|is|are|do|does|has|pays|"
                         r"signs|approves)\b|谁", re.I),
    "cost": re.compile(r"\bcosts?\b|\bprice[sd]?\b|\bpricing\b|\bfees?\b|\bcharged?\b|多少钱|费用|手续费|价格|"
                       r"收费|运费|花费|几块钱", re.I),
    "amount": re.compile(r"\bhow (?:much|many)\b|几个|几天|几次|几张|几台|多少(?!钱)|有几", re.I),
    "reason": re.compile(r"\bwhy\b|\bhow come\b|为什么|为啥|怎么会", re.I),
    # what follows from something ("what happens when the hour runs out?", "余额不够扣会怎么样？")
    "consequence": re.compile(r"\bwhat (?:happens|will happen|would happen)\b|\bwhat if\b|会怎么样|会怎样|会有什么|"
                              r"有什么(?:后果|影响)|影响大吗", re.I),
    # a yes-or-no question ("does turning it off void the warranty?", "押金能全部退回来吗？") asks whether,
    # not how; "can I ...?", "is there a way to ...?" and "有没有办法" ask how
    "whether": re.compile(r"^\s*(?:(?:and|so|but|also|ok|okay|then),?\s+)?"
                          r"(?:does|do(?!\s+(?:i|we|you)\s+(?:turn|set|get|make))|is(?!\s+it\s+(?:still\s+)?(?:possible|too\s+late|ok))(?!\s+there\s+a\s+way)(?!\s+it\s+possible)|are|will|would|did|has|have|was|were|"
                          r"should|must)\b|是不是|会不会|是否|能否|"
                          r"有没有(?!办法|方法)", re.I),
}
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*|\s+[—–]+\s+|\s+-{1,2}\s+|(?<=[—–])|"
                       r"(?<=[^\w\s,;:'\"])\s+(?=(?:How|What|Which|Where|When|Why|Who|Can|Could|Is|Are|Do|Does|Should)\b)|"
                       r"(?<=[\U0001F300-\U0001FAFF\u2600-\u27BF])\s*")
_PAREN = re.compile(r"\([^()]{0,200}\)|（[^（）]{0,200}）")
# A sentence asks when it has a question mark or a question word; the auxiliaries ("is", "can",
# "do") only at its start, since "sorry if this is basic" asks nothing.
_QUESTION = re.compile(r"[?？]|\b(?:how|what|which|where|why)\b|^\s*(?:\w+,\s*)?(?:when|who|can|could|is|are|do|does|"
                       r"should|will|would|may|any)\b|"
                       r"怎么|如何|吗|什么|哪|多久|几|谁|为什么|能不能|可以|是否|怎样|呢|咋", re.I)
_ZH_DIGIT = {"零": 0, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "一": 1}
_ZH_NUM = re.compile(r"((?:[二两三四五六七八九]|[一二三四五六七八九]?十[一二三四五六七八九]?))"
                     r"(个|台|次|条|份|位|张|块|号|月|日|天|年|点|元|小时|分钟|秒|周|岁|人|间|晚|层|楼|倍|折|万)")
NEGATION_EN = re.compile(r"(?<![\w/-])(?:don't|do not|dont|never|stop|no longer|shouldn't|should not|mustn't|must not|"
                         r"avoid|refrain from|prevent)(?![\w/-])", re.I)
NEGATION_ZH = re.compile(r"不要|(?<![级区特类分差个告识性辨鉴派告])别(?![人的])|"
                         r"不用|无需|不需要|禁止|不想|勿|停止|取消|不再|不许|不准|不让|解除")
# A correction changes what the conversation has established: "No, ...", "that's wrong", "I meant",
# "use B instead", "scratch that", "算了", "改用", "我是说". Kept narrow: a false positive only costs
# the session's cache, but "instead" or "不是" alone are far too common to count.
CORRECTION_EN = re.compile(r"^\s*(?:no|nope)\s*[,.!]|\b(?:that's|that is|you're|you are|this is)\s+"
                           r"(?:wrong|incorrect|not (?:right|correct|what i))|\b(?:i|what i) meant\b|"
                           r"\bnot what i (?:asked|meant|wanted)\b|\b(?:use|go with|switch to|try|do|make it)\b"
                           r"[^.?!]{0,40}\binstead\b|\bscratch that\b|\bnever ?mind\b|\bforget (?:that|it)\b|"
                           r"^\s*actually,?\s+(?:i|it|it's|we|use|make|the|that)\b|\bcorrection:", re.I)
CORRECTION_ZH = re.compile(r"不对|不是这样|不是这个|不是我要的|算了|改用|改成|我是说|我的意思是|"
                           r"换成|搞错|弄错|错了|更正")
# A number and what it counts: the next word that is not filler ("2 concurrent instances" ->
# "2 instance"); a unit right after it ("5 GB", "30%") is kept; "$500" is "500 dollar". Chinese:
# after a counting measure word (个, 台, 位, ...) the noun up to a particle ("2 个并发实例" ->
# "2 并发实例"); after a unit (号, 月, 天, 元, ...) the unit alone.
NUMBER_UNIT = re.compile(r"[$€£¥]?(?<![A-Za-z0-9_.])(\d+(?:\.\d+)?)"
                         r"(?=(?i:am|pm|k|[kmgt]i?b|ms|h|hrs?|st|nd|rd|th|x|d|s)\b|[^A-Za-z0-9]|$)"
                         r"\s*(%|[KMGT]i?B\b|ms\b|个|台|次|条|份|位|张|块|号|月|日|天|年|点|元|"
                         r"小时|分钟|秒)?\s*((?:[A-Za-z][A-Za-z-]*\s+){0,2}[A-Za-z][A-Za-z-]*|[\u4e00-\u9fff]{1,4})?")
COUNTERS = set("个台次条份位张")

# Chinese units named as the English counted noun, so "满三年" and "3 years" compare equal
ZH_UNITS = {"年": "year", "月": "month", "日": "day", "天": "day", "小时": "hour", "分钟": "minute", "秒": "second",
            "元": "yuan", "块": "yuan"}
PARTICLES = re.compile(r"[的了吗呢吧和与或在到入就都也还要想能可会让给把被]")
CURRENCY = {"$": "dollar", "€": "euro", "£": "pound", "¥": "yuan"}
FILLER = {"of", "to", "the", "a", "an", "more", "concurrent", "new", "extra", "additional", "different", "separate",
          "parallel", "other", "big", "small", "large", "in", "on", "at", "for", "per", "and", "or", "with",
          "simultaneous", "identical", "same"}
IDENT = re.compile(r"`([^`]+)`|\"([^\"]{1,60})\"|(?<!\w)'([^']{2,60})'(?!\w)|"
                   r"\b([A-Za-z_][A-Za-z0-9]*(?:[_./:-][A-Za-z0-9]+)+)\b|\b([a-z]+[A-Z][A-Za-z0-9]+)\b|"
                   r"\b(v?\d+(?:\.\d+){1,3})\b")
OPTION = re.compile(r"(?:\b(?i:option|plan|feature|mode|method|approach|service|server|region|tier)\s+"
                    r"([A-Z0-9][\w-]*)\b)|(?:(?:方案|功能|选项|模式|服务|套餐|版本)\s*([A-Za-z0-9]+))|"
                    r"(?:([A-Za-z0-9]+)\s*(?:方案|功能|选项|模式|服务|套餐|版本))|(?:(?<![\w'-])([A-HJ-Z])(?![\w'-]))")
NAME = re.compile(r"(?<![.!?]\s)(?<!^)(?<![-_./])\b([A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})*)\b")
ALLCAPS = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,}(?![\w-])")     # ERROR, API, EU, S3
# "set that up", "set it up": the object inside the verb
SET_UP = re.compile(r"\bset(?:s|ting)?\s+(?:it|that|this|them|those|these|one|everything)\s+up\b", re.I)
TURN_ON_OFF = re.compile(r"\b(?:turn|switch|flip)(?:s|ed|ing)?\b[^.?!]{0,40}?\b(on|off)\b", re.I)
STOP_NAMES = {"The", "This", "That", "What", "How", "Can", "Could", "Would", "Should", "Please", "Thanks", "Yes",
              "No", "Also", "And", "But", "Then", "Which", "Why", "When", "Where", "Who", "Is", "Are", "Do", "Does",
              "It", "My", "Our", "Your", "We", "You", "They", "If", "Ok", "Okay", "Hi", "Hello", "Let", "For"}


@dataclass(frozen=True)
class Fingerprint:
    action: str                        # "" when no rule matched
    entities: frozenset[str]
    negated: bool
    correction: bool
    asks: frozenset[str] = frozenset()  # what kind of answer: place, time, person, cost, amount, reason

    def agrees(self, other: "Fingerprint", texts: tuple[str, str] = ("", "")) -> bool:
        """Same request: no veto, the same action (or neither names one), the same kind of answer, and
        names and identifiers that overlap by at least a third when both have some (paraphrases
        drop or add incidental ones), or every name of the cached request mentioned somewhere in the
        new context ("csv" in "users.csv", "Power BI" said two turns ago). `texts`: the whole new and
        cached contexts."""
        if self.vetoes(other):
            return False
        # "how do I" and "what is" are question forms, not intents; but when one side names a real
        # action ("turn the blur off") and the other none ("blur my background"), nothing says they
        # ask the same: they do not agree
        strong = {self.action, other.action} - WEAK_ACTIONS
        if len(strong) > 1 or (strong & POLAR_ACTIONS and self.action != other.action):
            return False
        a = {e for e in self.entities if not e[:1].isdigit()}
        b = {e for e in other.entities if not e[:1].isdigit()}
        if not (a and b) or len(a & b) / len(a | b) >= 1 / 3:
            return True
        mine, theirs = texts[0].lower(), texts[1].lower()
        # every name of the cached request somewhere in the new context, or the other way round
        return (bool(mine) and all(e.lstrip("#").lower() in mine for e in b)) or \
            (bool(theirs) and all(e.lstrip("#").lower() in theirs for e in a))

    def vetoes(self, other: "Fingerprint") -> list[str]:
        """Differences that forbid a hit at any similarity: a flipped negation ("turn A on" / "do not
        turn A on"), opposite actions (enable / disable, create / delete), different counted things
        ("2 instances" / "2 requests"), or questions after different kinds of answer ("where are the
        deploy logs" / "how do I deploy", "how long" / "how much"). Embeddings put these pairs close
        together; no threshold separates them."""
        out = []
        plain, negative = (other, self) if self.negated else (self, other)
        # "怎么让它别推了" / "怎么关闭推送": not doing something is what turning it off asks for; but
        # "don't disable the firewall" / "disable the firewall" is still the opposite
        if self.negated != other.negated and not (plain.action in ("disable", "delete")
                                                   and negative.action != plain.action):
            out.append("negation flipped: one question says not to do what the other asks")
        pair = {self.action, other.action}
        if pair in OPPOSITE_ACTIONS:
            out.append(f"the new question {_does(self.action)}, the cached one {_does(other.action)}: the opposite")
        if self.asks != other.asks:
            out.append(f"the new question wants to know {_wants(self.asks)}, the cached one {_wants(other.asks)}")
        nums_a, nums_b = _counted(self.entities), _counted(other.entities)
        if nums_a and nums_b:
            if set(nums_a) != set(nums_b):
                out.append(f"other numbers: the new question says {_names(sorted(nums_a))}, the cached one "
                           f"{_names(sorted(nums_b))}")
            else:
                clash = [n for n in nums_a if nums_a[n] and nums_b[n] and not nums_a[n] & nums_b[n]]
                if clash:
                    out.append("the same numbers count other things: " + ", ".join(
                        f"{n} {' or '.join(sorted(nums_a[n]))} in the new question, {n} "
                        f"{' or '.join(sorted(nums_b[n]))} in the cached one" for n in clash))
        return out

    def differences(self, other: "Fingerprint") -> list[str]:
        """How this (new) question differs from `other` (the cached one), in plain sentences."""
        out = []
        if self.action != other.action:
            out.append(f"the new question {_does(self.action)}, the cached one {_does(other.action)}")
        if self.asks != other.asks:
            out.append(f"the new question wants to know {_wants(self.asks)}, the cached one {_wants(other.asks)}")
        if self.negated != other.negated:
            out.append("the new question says not to do it, the cached one does not" if self.negated else
                       "the cached question says not to do it, the new one does not")
        if self.entities != other.entities:
            only_a, only_b = sorted(self.entities - other.entities), sorted(other.entities - self.entities)
            said = [f"only the new question names {_names(only_a)}"] if only_a else []
            said += [f"only the cached one names {_names(only_b)}"] if only_b else []
            out.append(", ".join(said))
        return out

    def to_json(self) -> dict:
        return {"action": self.action, "entities": sorted(self.entities), "negated": self.negated,
                "correction": self.correction, "asks": sorted(self.asks)}

    @classmethod
    def from_json(cls, d: dict) -> "Fingerprint":
        return cls(d.get("action", ""), frozenset(d.get("entities", ())), bool(d.get("negated")),
                   bool(d.get("correction")), frozenset(d.get("asks", ())))


# The actions and kinds of answer in words, for the reasons a user reads.
ACTION_WORDS = {"disable": "turn something off", "enable": "turn something on",
                "delete": "delete or remove something", "create": "create or add something",
                "migrate": "move something", "deploy": "deploy or release something",
                "update": "update or change something", "compare": "compare things", "fix": "fix a problem",
                "price": "know a price", "explain": "have something explained", "howto": "know how to do something"}
ASKS_WORDS = {"place": "where", "time": "when or how long", "person": "who", "cost": "what it costs",
              "amount": "how much or how many", "reason": "why",
              "whether": "whether (yes or no)", "consequence": "what follows"}
# A Chinese question ending in 吗 asks whether, unless what comes right before it asks how, which or
# whether it can be done ("怎么…吗", "能…吗"). Read from the end of the text, not by a regular
# expression searched from every start: that was quadratic in the text's length.
_MA_END = re.compile(r"[吗么][？?]?\s*$")
_NOT_YES_NO = frozenset("怎如哪何谁几能以行")


def _ends_yes_or_no(text: str) -> bool:
    """Two or more characters that do not ask otherwise right before a final 吗 (or 么), not
    preceded by 有没有, 怎么 or 如何."""
    m = _MA_END.search(text)
    if not m:
        return False
    end = run = m.start()
    while run > 0 and text[run - 1] not in _NOT_YES_NO:
        run -= 1
    return any(text[max(0, i - 3):i] != "有没有" and text[max(0, i - 2):i] not in ("怎么", "如何")
               for i in range(run, end - 1))


# "can I ...?", "is it still possible to ...?", "能改吗？" ask whether something can be done: how to do it
_HOW = re.compile(r"\bhow\b|怎么|如何|怎样", re.I)
_POSSIBLE = re.compile(r"\b(?:possible|any way|a way)\b|有办法|有没有办法", re.I)


def _does(action: str) -> str:
    return f"asks to {ACTION_WORDS.get(action, action)}" if action else "did not name an action"


def _wants(asks: frozenset[str]) -> str:
    return " and ".join(ASKS_WORDS.get(a, a) for a in sorted(asks)) if asks else "how"


def _names(items: list[str]) -> str:
    shown = [f"“{i.lstrip('#')}”" for i in items[:4]]
    return ", ".join(shown) + (f" and {len(items) - 4} more" if len(items) > 4 else "")


@lru_cache(maxsize=4096)
def question(text: str) -> str:
    """The sentences of a message that ask something, its background left out ("fyi it's my first
    week — how do I deploy?", "(torn meniscus, don't ask)"). Sentences with a question mark win
    over sentences with only a question word; the whole message when none asks."""
    text = _PAREN.sub(" ", text)
    parts = [p for p in _SENTENCE.split(text) if p and p.strip()]
    marked = [p for p in parts if "?" in p or "？" in p]
    asked = marked or [p for p in parts if _QUESTION.search(p)]
    return " ".join(asked) if asked else text


def action_of(text: str) -> str:
    """The action of the sentences that ask (the background may name others: "dark mode switched on
    by itself — how do I turn it off?"), else of the whole text."""
    asked = question(text)
    return _action(asked) or (_action(text) if asked != text else "")


def _action(text: str) -> str:
    on_off = TURN_ON_OFF.findall(text)     # "turn A on": the object sits inside the verb; the last one asks
    if on_off:
        return "enable" if on_off[-1].lower() == "on" else "disable"
    if SET_UP.search(text):
        return "create"
    low = f" {text.lower()} "
    # the verb mentioned last is the request ("之前把它关了，现在想重新打开"); at the same place the
    # first category in ACTIONS's order, the most specific, wins. A question form ("怎么弄", "how
    # do I") names an action only when no verb does. Words joined by "/" or "-" ("stop/start",
    # "start-stop") are names, not verbs.
    found: dict[str, int] = {}
    for name, words in ACTIONS.items():
        for w in words:
            if w.isascii():
                ends = [m.end() for m in re.finditer(rf"(?<![a-z/-]){re.escape(w.strip())}(?![a-z/-])", low)]
            else:
                ends = [m.end() for m in re.finditer(re.escape(w), low)]
            if ends and ends[-1] > found.get(name, -1):
                found[name] = ends[-1]
    strong = {n: e for n, e in found.items() if n not in WEAK_ACTIONS} or found
    return max(strong, key=lambda n: (strong[n], -list(ACTIONS).index(n))) if strong else ""


# "Where do I configure that?", "where's the setting for dark mode?", "这个在哪配？", "要去哪里开这个功能":
# where to do something in an app or a process is how to do it, not a place.
PROCEDURAL_WHERE = re.compile(
    r"\bwhere\s+(?:(?:do|can|could|should|would)\s+(?:i|we|you)|in|to)\b(?!\s+(?:see|view|find|look|check|read|get))|"
    r"\bwhere(?:'s|\s+is|\s+are|\s+do\s+i\s+find)\s+(?:the\s+)?(?:setting|option|button|menu|toggle|switch|page)|"
    r"哪(?:里|儿)?(?:能|可以|才能|要|去)?(?:设置|配置|配|设|开|关|取消|填|退|改|弄|找|操作|申请|办|修改|添加|打开|"
    r"关闭|开通|调|绑|解绑|删除|上传)", re.I)


# ... but where to see or find something is a place: "where in the app can I see my bookings?"
_LOOK = re.compile(r"\b(?:see|view|find|look|check|read)\b|查看|看到|找到|在哪看", re.I)


def asks_of(text: str) -> frozenset[str]:
    """What kind of answer the question sentences want (ASPECTS); empty for "how do I" / "can I"."""
    asked = question(text)
    kinds = {name for name, rx in ASPECTS.items() if rx.search(asked)}
    if _ends_yes_or_no(asked):
        kinds.add("whether")
    if "place" in kinds and PROCEDURAL_WHERE.search(asked) and not _LOOK.search(asked):
        kinds.discard("place")
    if "whether" in kinds and (_HOW.search(asked) or _POSSIBLE.search(asked)):
        kinds.discard("whether")        # "does it have a dark mode? how do I switch it on?", "any way to…?"
    if kinds & {"cost", "time"}:          # "how much does it cost", "how many days does it take"
        kinds.discard("amount")
    return frozenset(kinds)


def normalise_numerals(text: str) -> str:
    """Chinese numerals before a counter or unit as digits ("满五年" -> "满5年", "两个" -> "2个"), so
    "3 years" and "三年" compare as numbers. 一 is left alone: it is an article as often as a number."""
    return _ZH_NUM.sub(lambda m: str(_zh_value(m.group(1))) + m.group(2), text)


def _zh_value(s: str) -> int:
    if "十" not in s:
        return int("".join(str(_ZH_DIGIT[c]) for c in s))
    tens, _, units = s.partition("十")
    return (_ZH_DIGIT[tens] if tens else 1) * 10 + (_ZH_DIGIT[units] if units else 0)


def entities_of(text: str) -> frozenset[str]:
    text = normalise_numerals(text)
    out: set[str] = set()
    for m in NUMBER_UNIT.finditer(text):
        num, unit, words = m.group(1), m.group(2) or "", (m.group(3) or "")
        sign = text[m.start()] if text[m.start()] in CURRENCY else ""
        if not sign and not unit and _after_name(text, m.start()):
            out.add(num)              # "Serie 6 washer", "Pixel 8": a model's number counts nothing
            continue
        if sign:
            out.add(f"{num} {CURRENCY[sign]}")
            continue
        if unit and unit not in COUNTERS:
            out.add(f"{num} {ZH_UNITS.get(unit, unit.lower())}")
            continue
        if words and re.fullmatch(r"[\u4e00-\u9fff]+", words):
            out.add(f"{num} {PARTICLES.split(words)[0]}".strip() if unit else num)
            continue
        if re.fullmatch(r"(?:19|20)\d\d", num):        # a year counts nothing: "2023 taxes" = "2023 return"
            out.add(num)
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


def _after_name(text: str, end: int) -> bool:
    """A capitalised word (two letters or more, not the text's first word, not a sentence's first)
    and at most one space right before `end`: "Serie 6", "Pixel 8". Read backwards from `end`, so a
    text with many numbers stays linear. A final line break may follow the space."""
    ends = [end] + ([end - 1] if end > 0 and text[end - 1] == "\n" else [])
    for e in ends:
        i = e - 1 if e > 0 and text[e - 1].isspace() else e
        j = i
        while j > 0 and ("a" <= text[j - 1] <= "z" or "A" <= text[j - 1] <= "Z"):
            j -= 1
        if (i - j >= 2 and "A" <= text[j] <= "Z" and j > 0 and not _WORDCH.match(text[j - 1])
                and not (j >= 2 and text[j - 2] in ".!?" and text[j - 1].isspace())):
            return True
    return False


_WORDCH = re.compile(r"\w")


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
    cleaned = re.sub(r"不用了|不需要了|用不着|用不上|不对|不错|不过|不同|不断|不久|不少|不如|不管|"
                     r"是不是|能不能|要不要|可不可以|会不会|对不对|好不好", "", text)
    return bool(NEGATION_ZH.search(cleaned))


@lru_cache(maxsize=4096)     # a replay asks it of every message in every turn's window
def is_correction(text: str) -> bool:
    return bool(CORRECTION_EN.search(text) or CORRECTION_ZH.search(text))


_CLAUSES = re.compile(r"[,，;；]\s*")


def asking_clause(text: str) -> str:
    """The clauses of the asking sentences that ask: "不想每个月自动扣钱了，在哪里取消？" asks to
    cancel; "if I don't use all my days, how many roll over?" asks how many. A wish or a condition
    before the question is background to it. The whole question when no clause alone asks."""
    asked = question(text)
    parts = [p for p in _CLAUSES.split(asked) if p.strip()]
    asking = [p for p in parts if _QUESTION.search(p)]
    return " ".join(asking) if asking and len(asking) < len(parts) else asked


@lru_cache(maxsize=4096)
def fingerprint(text: str) -> Fingerprint:
    """The fingerprint of the current user turn (the context window adds meaning to the vector,
    not to these fields: "it" does not name an entity). Negation counts in the sentences that ask:
    "(don't ask)" in the background negates nothing."""
    return Fingerprint(action_of(text), entities_of(text), negated(asking_clause(text)), is_correction(text),
                       asks_of(text))
