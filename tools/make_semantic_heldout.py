#!/usr/bin/env python3
"""Write the held-out labelled evaluation set for the context-aware semantic cache.

Usage:  python tools/make_semantic_heldout.py [OUTPUT_PATH]

Writes ``workbench/semantic/data/heldout.jsonl`` (or OUTPUT_PATH): one JSON object
per line with keys ``context``, ``cached_context``, ``category``, ``should_hit``,
``lang`` and ``id`` (``<scenario>/<lang>/<category>``).

The set was written independently of the main evaluation set and of the cache's
rules, so it can check whether they generalise.  Every case is hand-written data
below: 20 scenarios x {en, zh} x 6 categories = 240 cases.  Standard library only,
no randomness; the output is byte-for-byte deterministic.

Data notation: a conversation is a list of strings that alternate
user / assistant / user ..., always starting and ending with a user message.
Each scenario/language has a ``cached`` conversation (whose answer is cached) and
one entry per category; an entry is either a conversation (the new ``context``)
or a dict ``{"context": [...], "cached": [...]}`` when the case needs its own
cached conversation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CATEGORIES = (
    ("paraphrase", True),
    ("coreference", True),
    ("added_background", True),
    ("entity_swap", False),
    ("intent_reversal", False),
    ("related_different", False),
)
LANGS = ("en", "zh")
MAX_CHARS = 300

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "workbench" / "semantic" / "data" / "heldout.jsonl"


# --------------------------------------------------------------------------- #
# The cases.
# --------------------------------------------------------------------------- #

SCENARIOS = [
    # ------------------------------------------------------------------ 1
    ("car_start_stop", {
        "en": {
            "cached": ["How do I turn off the auto start-stop on a 2019 Ford Escape?"],
            "paraphrase": [
                "quick car question",
                "Sure, go ahead!",
                "On my 2019 Ford Escape, how can I switch the automatic engine stop/start off?",
            ],
            "coreference": [
                "My 2019 Ford Escape keeps shutting the engine off every time I stop at a light. Is that normal?",
                "Yes, that's the Auto Start-Stop system. It cuts the engine when the car is stationary to save fuel and restarts it when you lift off the brake.",
                "Ugh, I hate it. How do I turn that off?",
            ],
            "added_background": [
                "I just started doing rideshare driving and passengers keep asking why the engine dies at every light, lol. How do I turn off the auto start-stop on a 2019 Ford Escape?",
            ],
            "entity_swap": [
                "My 2019 Jeep Wrangler keeps shutting the engine off every time I stop at a light. Is that normal?",
                "Yes, that's the Auto Start-Stop system (Jeep calls it ESS). It cuts the engine when the vehicle is stationary to save fuel.",
                "Ugh, I hate it. How do I turn that off?",
            ],
            "intent_reversal": [
                "I turned off the auto start-stop on my 2019 Ford Escape a while ago and now I miss the fuel savings. How do I turn it back on?",
            ],
            "related_different": [
                "I've got a 2019 Ford Escape.",
                "Great, what can I help you with?",
                "Does switching off the auto start-stop void the warranty?",
            ],
        },
        "zh": {
            "cached": [
                "我开的是2020款本田思域。",
                "好的，有什么可以帮您？",
                "自动启停怎么关？",
            ],
            "paraphrase": ["20年的思域，等红灯老是自己熄火，那个怠速启停功能在哪关闭啊"],
            "coreference": [
                "我的2020款思域等红灯总熄火，是车坏了吗？",
                "不是故障，这是自动启停功能，车辆静止时自动熄火省油，松开刹车就会重新启动。",
                "原来如此，那这个怎么关？",
            ],
            "added_background": [
                "我开的是2020款本田思域。",
                "好的，有什么可以帮您？",
                "家里老人坐车，每次等红灯一熄火就被吓一跳。自动启停怎么关？",
            ],
            "entity_swap": [
                "我开的是2020款大众帕萨特。",
                "好的，有什么可以帮您？",
                "自动启停怎么关？",
            ],
            "intent_reversal": [
                "我开的是2020款本田思域。",
                "好的，有什么可以帮您？",
                "之前把自动启停关了，现在想重新打开，怎么弄？",
            ],
            "related_different": ["2020款本田思域的自动启停一直开着，会不会伤电瓶和启动机？"],
        },
    }),
    # ------------------------------------------------------------------ 2
    ("tax_dependents", {
        "en": {
            "cached": ["How do I add my daughter as a dependent on my 2023 return in TurboTax?"],
            "paraphrase": [
                "Using TurboTax for my 2023 taxes.",
                "Okay, what do you need help with?",
                "Where do I go to claim my daughter as a dependent?",
            ],
            "coreference": [
                "I'm doing my 2023 taxes in TurboTax and I'm almost finished.",
                "Great! Anything left that you're unsure about?",
                "Yeah, my daughter isn't on the return yet. How do I add her as a dependent in there?",
            ],
            "added_background": [
                "Hi, can you help with TurboTax?",
                "Of course - what do you need?",
                "It's my first year doing taxes myself instead of paying an accountant, so bear with me. How do I add my daughter as a dependent on my 2023 return?",
            ],
            "entity_swap": ["How do I add my mother as a dependent on my 2023 return in TurboTax?"],
            "intent_reversal": [
                "I'm doing my 2023 return in TurboTax and I listed my daughter as a dependent.",
                "Okay - is something wrong with that entry?",
                "Turns out her dad is claiming her this year. How do I remove her as a dependent?",
            ],
            "related_different": ["If I add my daughter as a dependent on my 2023 return in TurboTax, roughly how much will that lower what I owe?"],
        },
        "zh": {
            "cached": ["个税App里办2023年度汇算，子女教育专项附加扣除怎么添加？"],
            "paraphrase": ["请问在个人所得税App上做2023年的年度汇算，孩子的子女教育扣除要在哪里填报？"],
            "coreference": [
                "我在个税App上办2023年度汇算，发现子女教育专项附加扣除没填。",
                "这项扣除每个子女每月可以扣2000元，漏填会影响退税金额。",
                "对，那这个要怎么添加？",
            ],
            "added_background": ["我是第一次自己办汇算，之前都是公司财务帮忙弄的，有点摸不着头脑。个税App里办2023年度汇算，子女教育专项附加扣除怎么添加？麻烦了"],
            "entity_swap": [
                "我在个税App上办2023年度汇算，发现赡养老人专项附加扣除没填。",
                "这项扣除独生子女每月可以扣2000元，漏填会影响退税金额。",
                "对，那这个要怎么添加？",
            ],
            "intent_reversal": ["个税App里办2023年度汇算，子女教育专项附加扣除我和老婆都填了，重复了，怎么删掉？"],
            "related_different": ["个税App里办2023年度汇算，子女教育专项附加扣除每个孩子每月能扣多少？"],
        },
    }),
    # ------------------------------------------------------------------ 3
    ("hydrangea_color", {
        "en": {
            "cached": ["How do I make my bigleaf hydrangeas turn blue instead of pink?"],
            "paraphrase": ["My mophead hydrangeas keep flowering pink. What do I need to do to get blue blooms?"],
            "coreference": [
                "I've got two big hydrangea bushes by the porch, the mophead kind (macrophylla).",
                "Bigleaf hydrangeas are great. Their flower color actually depends on soil chemistry.",
                "Interesting! Right now they're pink. How do I get them to go blue?",
            ],
            "added_background": ["We're having our wedding in the backyard next summer and the theme color is blue \U0001f499 How do I make my bigleaf hydrangeas turn blue instead of pink?"],
            "entity_swap": [
                "I've got two big oakleaf hydrangeas by the porch.",
                "Oakleaf hydrangeas are lovely - great fall color too.",
                "Thanks! Right now the flowers are pinkish. How do I get them to go blue?",
            ],
            "intent_reversal": ["How do I make my bigleaf hydrangeas turn pink instead of blue?"],
            "related_different": [
                "My bigleaf hydrangeas are pink and I want them blue.",
                "You'll need to lower the soil pH, usually with aluminum sulfate or garden sulfur, so the plant can take up aluminum.",
                "Got it. And when's the right time of year to prune them?",
            ],
        },
        "zh": {
            "cached": ["无尽夏绣球想调成蓝色，具体该怎么弄？"],
            "paraphrase": ["我家阳台的无尽夏开的是粉花，怎样做才能让它开出蓝色的花？"],
            "coreference": [
                "我去年买了一盆无尽夏，今年开花了。",
                "恭喜！无尽夏是大叶绣球的品种，花色会随土壤酸碱度变化。",
                "现在是粉色的，我更喜欢蓝色，那它要怎么调成蓝色？",
            ],
            "added_background": ["我妈特别喜欢蓝色的绣球，阳台上那盆无尽夏却一直是粉的，想给她个惊喜。无尽夏绣球想调成蓝色，具体该怎么弄？谢谢！"],
            "entity_swap": ["圆锥绣球想调成蓝色，具体该怎么弄？"],
            "intent_reversal": [
                "我阳台上有一盆无尽夏，现在开的是蓝花。",
                "无尽夏在酸性土里会偏蓝，看来你的土比较酸。",
                "可我其实更喜欢粉色，怎么把它调成粉色？",
            ],
            "related_different": ["无尽夏绣球调蓝色的话，一般要多久才能看到效果？"],
        },
    }),
    # ------------------------------------------------------------------ 4
    ("camera_settings", {
        "en": {
            "cached": ["How do I turn on RAW shooting on a Sony A7 III?"],
            "paraphrase": [
                "can you help me with camera settings",
                "Sure - which camera do you have?",
                "sony a7iii. where in the menu do I set the file format to RAW?",
            ],
            "coreference": [
                "I just got a used Sony A7 III as my first full-frame.",
                "Nice pick! It's a very capable camera. What would you like to set up first?",
                "I want to shoot RAW so I can edit in Lightroom. How do I enable that on it?",
            ],
            "added_background": ["I'm heading to Iceland next week and a friend told me I'd regret shooting JPEG. How do I turn on RAW shooting on a Sony A7 III?"],
            "entity_swap": [
                "I just picked up a Sony A7 IV as my first full-frame.",
                "Nice pick! It's a very capable hybrid camera. What would you like to set up first?",
                "I want to shoot RAW so I can edit in Lightroom. How do I enable that on it?",
            ],
            "intent_reversal": ["How do I turn off RAW on a Sony A7 III and go back to JPEG only? My cards fill up way too fast."],
            "related_different": [
                "I've switched my Sony A7 III over to RAW.",
                "Great, RAW gives you a lot more latitude when editing.",
                "Roughly how many RAW shots will fit on a 64GB card?",
            ],
        },
        "zh": {
            "cached": ["佳能R6的长时间曝光降噪在哪里打开？"],
            "paraphrase": ["R6拍夜景想开长曝光降噪，菜单里要去哪找"],
            "coreference": [
                "最近在用佳能R6拍星空，长曝光的片子噪点有点多。",
                "可以试试机身的长时间曝光降噪功能，它会在曝光后再拍一张暗帧来消除热噪点。",
                "这个功能在哪打开？",
            ],
            "added_background": [
                "你好，问个佳能相机的问题",
                "你好，请说。",
                "周末准备跟朋友去郊外拍银河，第一次拍星空有点紧张哈哈。R6的长时间曝光降噪在哪里打开？",
            ],
            "entity_swap": ["佳能R6的高ISO感光度降噪在哪里打开？"],
            "intent_reversal": ["佳能R6的长时间曝光降噪怎么关掉？每拍一张都要等半天"],
            "related_different": [
                "我用佳能R6拍星空，已经把长时间曝光降噪打开了。",
                "好的，开启后相机会在每次长曝光后自动拍一张暗帧来降噪。",
                "那拍一张30秒的照片，前后一共要等多久？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 5
    ("video_editing", {
        "en": {
            "cached": ["How do I add cinematic black bars (letterbox) to my video in DaVinci Resolve?"],
            "paraphrase": ["In Resolve, what's the way to put those widescreen movie bars along the top and bottom of my footage?"],
            "coreference": [
                "I'm editing a short film in DaVinci Resolve.",
                "Sounds fun! What do you need help with?",
                "I want it to look more cinematic with letterbox bars. How do I add those?",
            ],
            "added_background": ["I'm making a little travel montage for my grandma's 80th birthday, nothing fancy. How do I add cinematic black bars (letterbox) to my video in DaVinci Resolve?"],
            "entity_swap": ["How do I add cinematic black bars (letterbox) to my video in Premiere Pro?"],
            "intent_reversal": [
                "I'm editing some old footage in DaVinci Resolve.",
                "Sure - what do you need to do with it?",
                "It was exported with letterbox bars baked in and I want it to fill the frame. How do I remove the black bars?",
            ],
            "related_different": [
                "I'm cutting a short film in DaVinci Resolve and want letterbox bars.",
                "Letterboxing is easy in Resolve - you can use Output Blanking or a custom timeline aspect ratio.",
                "Which ratio looks more cinematic, 2.35:1 or 2.39:1?",
            ],
        },
        "zh": {
            "cached": [
                "我在用剪映电脑版剪视频。",
                "好的，遇到什么问题了吗？",
                "怎么给视频加自动字幕？",
            ],
            "paraphrase": [
                "问个剪辑软件的问题",
                "好的，请说。",
                "剪映PC版要怎么自动识别语音生成字幕？",
            ],
            "coreference": [
                "剪映电脑版能自动出字幕吗？我看别人视频里的字幕好像都是自动生成的。",
                "可以的，剪映有“识别字幕”功能，能把视频里的人声自动转成字幕。",
                "那具体怎么操作呢？",
            ],
            "added_background": [
                "我在用剪映电脑版剪视频。",
                "好的，遇到什么问题了吗？",
                "我是做美食账号的，每条视频都手打字幕太累了，我打字又慢\U0001f602 怎么给视频加自动字幕？",
            ],
            "entity_swap": [
                "我在用Premiere剪视频。",
                "好的，遇到什么问题了吗？",
                "怎么给视频加自动字幕？",
            ],
            "intent_reversal": [
                "我在用剪映电脑版剪视频。",
                "好的，遇到什么问题了吗？",
                "自动生成的字幕识别得一塌糊涂，怎么一次性全部删掉？",
            ],
            "related_different": ["剪映电脑版的自动字幕要开会员才能用吗？"],
        },
    }),
    # ------------------------------------------------------------------ 6
    ("transit_card", {
        "en": {
            "cached": ["How do I set up auto top-up on my Oyster card?"],
            "paraphrase": ["oyster card - how can i get it to reload automatically when the balance runs low?"],
            "coreference": [
                "I commute into London every day on an Oyster card and keep running out of credit at the barrier.",
                "That's annoying! Have you looked at Auto top-up? It adds credit automatically when your balance drops below a set amount.",
                "That sounds perfect. How do I set that up?",
            ],
            "added_background": ["I'm moving to London next month for a new job and trying to get organised before I start (so many things to sort!). How do I set up auto top-up on my Oyster card?"],
            "entity_swap": ["How do I set up auto top-up on my Clipper card?"],
            "intent_reversal": [
                "I set up Oyster auto top-up last year.",
                "Handy! Is it working okay?",
                "Yes, but I'm moving back home next month. How do I cancel auto top-up on my Oyster card?",
            ],
            "related_different": ["How much does auto top-up add to my Oyster card each time?"],
        },
        "zh": {
            "cached": ["上海公共交通卡不用了，怎么退卡？"],
            "paraphrase": [
                "我有张上海公共交通卡。",
                "嗯，有什么问题吗？",
                "这卡以后用不着了，请问要去哪儿退、怎么退？",
            ],
            "coreference": [
                "我下个月要离开上海了，手里还有一张上海公共交通卡。",
                "好的，需要我帮您做些什么吗？",
                "以后也用不上了，这张卡怎么退？",
            ],
            "added_background": ["在上海读了四年书，马上毕业回老家了，有点舍不得\U0001f62d 上海公共交通卡不用了，怎么退卡？"],
            "entity_swap": [
                "我下个月要离开北京了，手里还有一张北京一卡通。",
                "好的，需要我帮您做些什么吗？",
                "以后也用不上了，这张卡怎么退？",
            ],
            "intent_reversal": ["刚来上海上班，想办一张上海公共交通卡，怎么办卡？"],
            "related_different": ["上海公共交通卡退卡的话，押金和卡里的余额能全部退回来吗？"],
        },
    }),
    # ------------------------------------------------------------------ 7
    ("gym_membership", {
        "en": {
            "cached": [
                "I'm a member at Planet Fitness.",
                "Great! How can I help with your membership?",
                "I'm having knee surgery soon. How do I freeze my membership?",
            ],
            "paraphrase": ["Planet Fitness member with knee surgery coming up - what's the process to put my membership on hold?"],
            "coreference": [
                "I have a Planet Fitness membership, but I've got knee surgery next week and won't be able to go for a while.",
                "Sorry to hear about the surgery - hope the recovery goes smoothly!",
                "Thanks. How do I freeze it in the meantime?",
            ],
            "added_background": [
                "I'm a member at Planet Fitness.",
                "Great! How can I help with your membership?",
                "I'm having knee surgery soon (torn meniscus, skiing accident, don't ask \U0001f643). How do I freeze my membership?",
            ],
            "entity_swap": [
                "I'm a member at Anytime Fitness.",
                "Great! How can I help with your membership?",
                "I'm having knee surgery soon. How do I freeze my membership?",
            ],
            "intent_reversal": [
                "I'm a member at Planet Fitness.",
                "Great! How can I help with your membership?",
                "My knee has healed after the surgery. How do I unfreeze my membership?",
            ],
            "related_different": [
                "I'm a member at Planet Fitness.",
                "Great! How can I help with your membership?",
                "I'm having knee surgery soon. Do I still get charged the annual fee while my membership is frozen?",
            ],
        },
        "zh": {
            "cached": ["乐刻App上怎么预约团课？"],
            "paraphrase": ["想在乐刻上订一节团操课，App里要怎么操作？"],
            "coreference": [
                "我刚办了乐刻的月卡，听说他们的团课挺不错的。",
                "是的，乐刻的团课种类挺多，比如搏击操、瑜伽、单车，月卡会员一般都能参加。",
                "那在App里怎么约这个？",
            ],
            "added_background": ["最近体检查出脂肪肝，医生让我多运动，一个人撸铁又坚持不下来，想跟着上课。乐刻App上怎么预约团课？"],
            "entity_swap": ["乐刻App上怎么预约私教课？"],
            "intent_reversal": [
                "我在乐刻App上约了周六上午的瑜伽团课。",
                "好的，记得提前几分钟到场。",
                "临时有事去不了了，怎么取消这节课？",
            ],
            "related_different": [
                "我在乐刻App上约了明晚的单车团课。",
                "好的，记得提前几分钟到场。",
                "要是迟到十分钟，还能进去上吗？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 8
    ("cooking_doneness", {
        "en": {
            "cached": ["How long should I boil eggs for soft-boiled with a runny yolk?"],
            "paraphrase": ["soft boiled eggs w/ a drippy yolk - how many minutes in the boiling water?"],
            "coreference": [
                "I want eggs for breakfast with the yolk still runny, for dipping toast soldiers.",
                "Classic! Soft-boiled eggs are perfect for that.",
                "How many minutes do I boil them for?",
            ],
            "added_background": ["I want to surprise my partner with breakfast in bed tomorrow, they love dippy eggs. How long should I boil eggs for soft-boiled with a runny yolk?"],
            "entity_swap": ["How long should I boil quail eggs for soft-boiled with a runny yolk?"],
            "intent_reversal": [
                "Making eggs for a picnic salad tomorrow.",
                "Nice - chopped into egg salad, or halved on top?",
                "Halved on top. How long should I boil them for hard-boiled with a fully set yolk?",
            ],
            "related_different": [
                "I'm making soft-boiled eggs with runny yolks.",
                "Great - lower them into boiling water for about 6 minutes, then straight into ice water.",
                "The shell always tears the white when I peel them. How do I peel them cleanly?",
            ],
        },
        "zh": {
            "cached": ["电饭煲煮的米饭老是偏硬，下次水要怎么加？"],
            "paraphrase": ["用电饭锅焖饭总是有点硬，加水量该怎么调整比较好？"],
            "coreference": [
                "我家电饭煲煮出来的米饭口感一直不太对。",
                "是偏硬还是偏软呢？",
                "偏硬。那这种情况，下次水要怎么加？",
            ],
            "added_background": ["刚搬出来自己住，之前从来没做过饭，电饭煲是新买的。电饭煲煮的米饭老是偏硬，下次水要怎么加？"],
            "entity_swap": ["电饭煲煮的糙米饭老是偏硬，下次水要怎么加？"],
            "intent_reversal": [
                "我家电饭煲煮出来的米饭口感一直不太对。",
                "是偏硬还是偏软呢？",
                "偏软，还有点发黏。那这种情况，下次水要怎么加？",
            ],
            "related_different": ["电饭煲刚煮好的米饭有点硬，现在还能怎么补救？"],
        },
    }),
    # ------------------------------------------------------------------ 9
    ("pet_weight", {
        "en": {
            "cached": ["My cat is a bit overweight. How can I help her lose weight safely?"],
            "paraphrase": ["What's a safe way to slim down my chubby cat? She's a girl, if that matters"],
            "coreference": [
                "Our vet said Luna, our 6-year-old tabby, is carrying a couple of extra pounds.",
                "That's pretty common in indoor cats. Did the vet recommend anything?",
                "Not really, just 'feed less'. How can I help her drop the weight safely?",
            ],
            "added_background": [
                "Hi! Cat question.",
                "Hi! Happy to help - what's going on?",
                "My cat is a bit overweight. She's honestly the love of my life and I'd do anything for her, haha. How can I help her lose weight safely?",
            ],
            "entity_swap": ["My rabbit is a bit overweight. How can I help her lose weight safely?"],
            "intent_reversal": [
                "Our vet says Luna, our 6-year-old tabby, is underweight after her dental surgery.",
                "Poor thing - weight loss after dental work is common since eating can be sore for a while.",
                "She's eating okay again now. How can I help her put the weight back on safely?",
            ],
            "related_different": ["My cat is a bit overweight. Could that be why she's stopped grooming her back?"],
        },
        "zh": {
            "cached": ["我家柯基最近胖了好多，体检说超重了，怎么给它减肥比较科学？"],
            "paraphrase": ["柯基超重了，想帮它科学地减重，有什么靠谱的方法？"],
            "coreference": [
                "我家有只四岁的柯基，叫豆豆。",
                "柯基很可爱！豆豆最近怎么样？",
                "上周打疫苗，医生说它超重了三公斤，怎么给它科学地减下来？",
            ],
            "added_background": ["我家柯基最近胖了好多，体检说超重了（主要怪我爸老偷偷喂它火腿肠\U0001f644）。怎么给它减肥比较科学？"],
            "entity_swap": [
                "我家有只四岁的英短，叫豆豆。",
                "英短很可爱！豆豆最近怎么样？",
                "上周打疫苗，医生说它超重了一公斤多，怎么给它科学地减下来？",
            ],
            "intent_reversal": ["我家柯基最近瘦了好多，体检说偏瘦，怎么给它增重比较科学？"],
            "related_different": ["我家柯基最近胖了好多，体检说超重了，这对它的腰椎影响大吗？"],
        },
    }),
    # ------------------------------------------------------------------ 10
    ("home_plumbing", {
        "en": {
            "cached": ["How can I increase the water pressure in my shower?"],
            "paraphrase": ["my shower is basically a sad trickle. what can I do to get a stronger flow out of it?"],
            "coreference": [
                "We moved into an older house and the upstairs shower is really weak.",
                "That's common in older homes - it can be anything from a clogged showerhead to low supply pressure.",
                "What can I do to get more pressure out of it?",
            ],
            "added_background": ["I've got long thick hair and rinsing out conditioner takes forever \U0001f629 How can I increase the water pressure in my shower?"],
            "entity_swap": ["How can I increase the water pressure in my garden hose?"],
            "intent_reversal": ["How can I reduce the water pressure in my shower? It honestly stings."],
            "related_different": [
                "The water pressure in my shower used to be great.",
                "What changed?",
                "It suddenly dropped a few days ago. Why would that happen?",
            ],
        },
        "zh": {
            "cached": ["燃气热水器出水温度怎么调高一点？"],
            "paraphrase": [
                "问个热水器的问题",
                "好的，请说。",
                "家里燃气热水器出来的水不够热，想把温度往上调，该怎么弄？",
            ],
            "coreference": [
                "我家用的是燃气热水器，最近冬天洗澡感觉水温不够。",
                "冬天进水温度低，出水温度确实会受影响。",
                "那它的温度怎么调高？",
            ],
            "added_background": ["家里老人怕冷，洗澡老说水温低，我平时上班也顾不上。燃气热水器出水温度怎么调高一点？"],
            "entity_swap": [
                "我家用的是电热水器，最近冬天洗澡感觉水温不够。",
                "冬天进水温度低，加热后的水温确实会受影响。",
                "那它的温度怎么调高？",
            ],
            "intent_reversal": ["燃气热水器出水太烫了，温度怎么调低一点？"],
            "related_different": ["燃气热水器出水温度调高一点，会不会更费气？"],
        },
    }),
    # ------------------------------------------------------------------ 11
    ("daw_recording", {
        "en": {
            "cached": ["How do I turn on the count-in before recording in Logic Pro?"],
            "paraphrase": [
                "I'm recording guitar parts in Logic Pro.",
                "Cool! How's it going?",
                "Annoying, tbh. How can I get a bar of clicks before the recording actually starts?",
            ],
            "coreference": [
                "When I hit record in Logic Pro it starts recording instantly and I always miss the first beat.",
                "A count-in would help - it plays a bar or two of metronome clicks before recording begins.",
                "Yes, that's what I need. How do I turn it on?",
            ],
            "added_background": ["Total beginner here, just bought a cheap MIDI keyboard and I'm teaching myself. How do I turn on the count-in before recording in Logic Pro?"],
            "entity_swap": ["How do I turn on the count-in before recording in GarageBand?"],
            "intent_reversal": ["How do I turn off the count-in before recording in Logic Pro?"],
            "related_different": [
                "I've turned on the count-in in Logic Pro.",
                "Great, now you'll hear a bar of clicks before recording starts.",
                "Can I make it two bars instead of one?",
            ],
        },
        "zh": {
            "cached": [
                "我用的是FL Studio 21。",
                "好的，有什么问题？",
                "怎么把工程导出成WAV？",
            ],
            "paraphrase": ["FL Studio 21里，做好的工程要怎么渲染成wav文件？"],
            "coreference": [
                "最近在学编曲，用的是FL Studio 21。",
                "FL Studio做电子乐很顺手。有什么想问的？",
                "我做完一首了，在这个软件里怎么导出成WAV？",
            ],
            "added_background": [
                "我用的是FL Studio 21。",
                "好的，有什么问题？",
                "第一次做完一首完整的beat，想发给朋友听听，有点小激动哈哈。怎么把工程导出成WAV？",
            ],
            "entity_swap": [
                "我用的是Cubase 13。",
                "好的，有什么问题？",
                "怎么把工程导出成WAV？",
            ],
            "intent_reversal": [
                "我用的是FL Studio 21。",
                "好的，有什么问题？",
                "怎么把WAV文件导入到工程里？",
            ],
            "related_different": [
                "我用的是FL Studio 21。",
                "好的，有什么问题？",
                "导出WAV的时候，采样率和位深选多少比较合适？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 12
    ("game_console", {
        "en": {
            "cached": ["How do I turn off HDR on my PS5?"],
            "paraphrase": ["ps5: where's the setting to disable HDR output?"],
            "coreference": [
                "Games on my PS5 look really washed out on my new TV.",
                "That's often caused by HDR settings that don't match what your TV can handle. Turning HDR off is a quick way to test.",
                "Ok, how do I switch that off?",
            ],
            "added_background": ["My brother gave me his PS5 for my birthday, pretty stoked, still learning my way around it. How do I turn off HDR on my PS5?"],
            "entity_swap": ["How do I turn off HDR on my Xbox Series X?"],
            "intent_reversal": [
                "I just got a new LG OLED that supports HDR.",
                "Great TV for gaming! What are you hooking up to it?",
                "My PS5. How do I turn on HDR on the PS5?",
            ],
            "related_different": ["Does turning off HDR on my PS5 affect the frame rate in games?"],
        },
        "zh": {
            "cached": ["Switch怎么设置家长控制？"],
            "paraphrase": ["想给任天堂Switch加上家长控制，要在哪里设置？"],
            "coreference": [
                "我儿子八岁，最近天天抱着Switch不撒手。",
                "这个年纪确实容易玩过头，可以借助一些工具管理游戏时间。",
                "听说它自带家长控制，这个怎么设置？",
            ],
            "added_background": [
                "过年家里亲戚小孩多，怕他们拿我的Switch乱玩乱买游戏。",
                "可以理解，想提前做点防护？",
                "对，Switch怎么设置家长控制？",
            ],
            "entity_swap": ["PS5怎么设置家长控制？"],
            "intent_reversal": [
                "家里那台Switch之前给孩子设过家长控制，现在他都上大学了。",
                "明白，是想调整一下相关设置吗？",
                "对，用不着了，怎么把家长控制解除掉？",
            ],
            "related_different": ["Switch的家长控制PIN码忘了怎么办？"],
        },
    }),
    # ------------------------------------------------------------------ 13
    ("library_account", {
        "en": {
            "cached": ["How do I place a hold on a book through the Toronto Public Library website?"],
            "paraphrase": ["On the TPL site, how do I reserve a book so I'm in the queue for it?"],
            "coreference": [
                "I found the new Emily Henry novel in the Toronto Public Library catalogue, but every copy is checked out.",
                "It's a popular title, so there's probably a waitlist you can join online.",
                "Okay, how do I place a hold on it through the website?",
            ],
            "added_background": [
                "Hi there",
                "Hi! How can I help?",
                "I just moved to Toronto and got my library card yesterday, very excited about free books lol. How do I place a hold on a book through the Toronto Public Library website?",
            ],
            "entity_swap": [
                "I'm in Vancouver and have a VPL card.",
                "Great! What can I help you with?",
                "How do I place a hold on a book through the library website?",
            ],
            "intent_reversal": ["How do I cancel a hold on a book through the Toronto Public Library website?"],
            "related_different": [
                "I use the Toronto Public Library a lot.",
                "Great - TPL has a huge collection. How can I help?",
                "How many holds am I allowed to have at once?",
            ],
        },
        "zh": {
            "cached": ["上海图书馆的读者证怎么绑定到微信公众号？"],
            "paraphrase": ["想在上图的微信公众号里绑上我的借书证，要怎么弄？"],
            "coreference": [
                "我有一张上海图书馆的读者证，一直没怎么用。",
                "读者证可以借书、预约座位，还能在线查借阅记录。",
                "听说可以绑到微信公众号上查借阅记录，它要怎么绑？",
            ],
            "added_background": ["孩子放暑假，天天带他去上图看书，想绑个微信方便看还书日期。上海图书馆的读者证怎么绑定到微信公众号？"],
            "entity_swap": ["上海图书馆的读者证怎么绑定到支付宝？"],
            "intent_reversal": [
                "我之前把上图的读者证绑在了微信公众号上。",
                "好的，有什么问题吗？",
                "这个微信号以后不用了，读者证怎么从公众号上解绑？",
            ],
            "related_different": ["上海图书馆的读者证绑定微信公众号以后，能直接在上面续借吗？"],
        },
    }),
    # ------------------------------------------------------------------ 14
    ("tenancy_rules", {
        "en": {
            "cached": [
                "I rent an apartment in Ontario on a month-to-month lease.",
                "Got it. What would you like to know about your tenancy?",
                "How much notice do I need to give my landlord before moving out?",
            ],
            "paraphrase": ["Ontario tenant, monthly tenancy - what's the required notice period if I want to leave my apartment?"],
            "coreference": [
                "My lease in Ontario went month-to-month after the first year ended.",
                "That's standard in Ontario - once a fixed-term lease ends, it continues month to month on the same terms.",
                "Good to know. I found a new place, so how much notice do I have to give my landlord to end it?",
            ],
            "added_background": ["Hi! My partner and I are finally buying a house (!!). I rent an apartment in Ontario on a month-to-month lease - how much notice do I need to give my landlord before moving out?"],
            "entity_swap": [
                "I rent an apartment in Quebec on a month-to-month lease.",
                "Got it. What would you like to know about your tenancy?",
                "How much notice do I need to give my landlord before moving out?",
            ],
            "intent_reversal": [
                "I rent an apartment in Ontario on a month-to-month lease.",
                "Got it. What would you like to know about your tenancy?",
                "How much notice does my landlord need to give me before making me move out?",
            ],
            "related_different": [
                "I rent an apartment in Ontario on a month-to-month lease.",
                "Got it. What would you like to know about your tenancy?",
                "Can my landlord raise the rent while I'm month-to-month?",
            ],
        },
        "zh": {
            "cached": ["租房合同签了一年，现在才住了半年，房东说下个月要涨房租，合同期内他能这么做吗？"],
            "paraphrase": ["一年的租约还没到期，房东就通知下个月要加租，这种情况合法吗？"],
            "coreference": [
                "我去年签了一份一年期的租房合同，现在住了半年。",
                "好的，合同履行中遇到什么问题了吗？",
                "房东突然说下个月开始涨租，这份合同还没到期，他可以这样吗？",
            ],
            "added_background": ["我刚毕业，一个人在杭州上班，工资本来就不高\U0001f972 租房合同签了一年，现在才住了半年，房东说下个月要涨房租，合同期内他能这么做吗？"],
            "entity_swap": ["租房合同签了一年，下个月就到期了，房东说续签的话要涨房租，他能这么做吗？"],
            "intent_reversal": ["租房合同签了一年，现在才住了半年，附近房租都降了，合同期内我能要求房东降房租吗？"],
            "related_different": [
                "我去年签了一份一年期的租房合同，现在住了半年。",
                "好的，合同履行中遇到什么问题了吗？",
                "房东说他要卖房，让我下个月搬走，合同没到期他能这么做吗？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 15
    ("parcel_options", {
        "en": {
            "cached": ["How do I add signature confirmation to a UPS package I'm sending?"],
            "paraphrase": ["Sending a parcel with UPS - how can I make it so the recipient has to sign for it on delivery?"],
            "coreference": [
                "I'm shipping my old laptop to a buyer across the country with UPS.",
                "Makes sense to use a tracked service for something valuable. Anything you want to add to the shipment?",
                "Yeah, I want them to have to sign when it arrives. How do I add that?",
            ],
            "added_background": ["Last time I sold something online the buyer claimed it never showed up and I was out $200, so, lesson learned. How do I add signature confirmation to a UPS package I'm sending?"],
            "entity_swap": ["How do I add signature confirmation to a USPS package I'm sending?"],
            "intent_reversal": [
                "I shipped a laptop to a buyer with UPS yesterday and added signature confirmation.",
                "Good call for something that valuable.",
                "The buyer says they'll be at work all week. How do I remove the signature requirement so it can just be left at the door?",
            ],
            "related_different": ["How much extra does signature confirmation cost on a UPS package?"],
        },
        "zh": {
            "cached": ["寄顺丰怎么给快递保价？"],
            "paraphrase": ["用顺丰发件的时候想给包裹上个保价，应该怎么操作？"],
            "coreference": [
                "我要把一台相机寄给外地的朋友，打算用顺丰。",
                "顺丰时效和服务都比较稳，相机这种贵重物品记得包装好。",
                "嗯，我还想给它保个价，怎么弄？",
            ],
            "added_background": [
                "之前寄东西被摔坏过，结果只赔了一点点。",
                "那确实挺糟心的。这次要寄什么吗？",
                "嗯，这次学乖了。寄顺丰怎么给快递保价？",
            ],
            "entity_swap": ["寄京东物流怎么给快递保价？"],
            "intent_reversal": ["寄顺丰的时候默认给我勾了保价，怎么取消？"],
            "related_different": [
                "我要把一台相机寄给外地的朋友，用顺丰，还想保个价。",
                "相机这种贵重物品建议保价，包装也要做好。",
                "保价费是怎么算的？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 16
    ("bi_dashboards", {
        "en": {
            "cached": ["How do I set up scheduled refresh for a Power BI dataset?"],
            "paraphrase": ["Power BI Service: how can I make my dataset update automatically on a schedule instead of me refreshing it by hand?"],
            "coreference": [
                "I published a sales report to the Power BI service, but the numbers only update when I republish from Desktop.",
                "That's because the dataset isn't refreshing on its own. You can configure it to refresh on a schedule in the service.",
                "How do I set that up?",
            ],
            "added_background": ["My manager keeps asking why the dashboard shows last week's numbers, so I need to sort this out today \U0001f605 How do I set up scheduled refresh for a Power BI dataset?"],
            "entity_swap": [
                "I published a sales dashboard to Tableau Cloud, but the numbers only update when I republish from Desktop.",
                "That's because the extract isn't refreshing on its own. You can configure it to refresh on a schedule.",
                "How do I set that up?",
            ],
            "intent_reversal": ["How do I turn off scheduled refresh for a Power BI dataset?"],
            "related_different": ["How many scheduled refreshes per day can a Power BI dataset have on a Pro license?"],
        },
        "zh": {
            "cached": ["Power BI报表里怎么把某一页隐藏起来，不让查看的人看到？"],
            "paraphrase": ["PBI里有个页面只是放辅助计算的，不想给用户看，怎么设成隐藏？"],
            "coreference": [
                "我的Power BI报表有五页，第三页是放明细数据给我自己核对用的。",
                "明白，这种辅助页很常见。需要对它做什么处理吗？",
                "对，不想让看报表的人看到第三页，怎么把它藏起来？",
            ],
            "added_background": ["明天要给老板演示月度经营报表，时间紧任务重，先谢谢了\U0001f64f Power BI报表里怎么把某一页隐藏起来，不让查看的人看到？"],
            "entity_swap": ["Power BI报表里怎么把某一个图表隐藏起来，不让查看的人看到？"],
            "intent_reversal": [
                "我之前把Power BI报表里放明细的第三页隐藏了。",
                "好的，查看报表的人现在应该看不到那一页了。",
                "现在老板也想看明细，怎么把它重新显示出来？",
            ],
            "related_different": ["Power BI报表里隐藏的页面，查看的人还能通过书签或钻取跳过去吗？"],
        },
    }),
    # ------------------------------------------------------------------ 17
    ("account_2fa", {
        "en": {
            "cached": [
                "I use Bitwarden as my password manager.",
                "Good choice. What can I help with?",
                "How do I turn on two-factor authentication for it?",
            ],
            "paraphrase": ["How can I enable 2FA on my Bitwarden account login?"],
            "coreference": [
                "Which password manager would you recommend for a family?",
                "Bitwarden is a solid option - free for basic use, open source, and it has a family plan.",
                "I went with it. How do I set up two-step login on it now?",
            ],
            "added_background": [
                "I use Bitwarden as my password manager.",
                "Good choice. What can I help with?",
                "A coworker just had her email hacked and it freaked me out a little. How do I turn on two-factor authentication for my Bitwarden?",
            ],
            "entity_swap": [
                "I use 1Password as my password manager.",
                "Good choice. What can I help with?",
                "How do I turn on two-factor authentication for it?",
            ],
            "intent_reversal": [
                "I use Bitwarden as my password manager.",
                "Good choice. What can I help with?",
                "How do I turn off two-factor authentication for it?",
            ],
            "related_different": [
                "I use Bitwarden as my password manager.",
                "Good choice. What can I help with?",
                "Which two-factor methods does it support?",
            ],
        },
        "zh": {
            "cached": ["Steam手机令牌怎么开启？"],
            "paraphrase": ["想给Steam账号绑上手机版的Steam Guard验证器，在哪设置？"],
            "coreference": [
                "最近好多人Steam号被盗，我有点慌。",
                "建议尽快开启Steam令牌，尤其是手机令牌，安全性比邮箱验证高不少。",
                "那手机版的要怎么开？",
            ],
            "added_background": ["我号里有好几千块的游戏和饰品，被盗就亏大了。Steam手机令牌怎么开启？"],
            "entity_swap": [
                "Steam令牌是不是分手机和邮箱两种？",
                "对，手机令牌用Steam App生成验证码，邮箱令牌则把验证码发到你绑定的邮箱。",
                "我手机经常不在身边，想用邮箱那种，怎么开启？",
            ],
            "intent_reversal": ["Steam手机令牌怎么移除？"],
            "related_different": ["Steam手机令牌换新手机了，怎么转移过去？"],
        },
    }),
    # ------------------------------------------------------------------ 18
    ("slicer_settings", {
        "en": {
            "cached": ["How do I add a brim to my print in Cura?"],
            "paraphrase": ["Cura question - where's the setting for that flat ring around the base of the model that helps it stick to the bed?"],
            "coreference": [
                "My prints keep lifting at the corners on the first layer. I'm slicing in Cura.",
                "Adding a brim usually helps - it's a thin ring of extra material around the base that increases bed adhesion.",
                "Makes sense. How do I add one?",
            ],
            "added_background": ["Printing a cosplay helmet for a con in a couple weeks and the base is huge, so I'm paranoid about it coming loose. How do I add a brim to my print in Cura?"],
            "entity_swap": ["How do I add a raft to my print in Cura?"],
            "intent_reversal": ["How do I get rid of the brim on my print in Cura? It keeps getting added and I don't want it."],
            "related_different": [
                "Just finished a print in Cura with a brim added.",
                "Nice - did the brim stop the corners lifting?",
                "Yep! What's the cleanest way to get the brim off the finished part?",
            ],
        },
        "zh": {
            "cached": ["Bambu Studio里怎么给模型开启树状支撑？"],
            "paraphrase": ["拓竹的切片软件要怎么设置，才能生成那种树枝一样的支撑？"],
            "coreference": [
                "我想打一个手办，胳膊悬空的地方挺多，用的是Bambu Studio切片。",
                "悬空多的模型需要加支撑。Bambu Studio里有普通支撑和树状支撑两种，手办一般推荐树状的，省料也好拆。",
                "好，那后一种怎么开？",
            ],
            "added_background": ["第一次自己切片，以前都是直接下载别人切好的3mf\U0001f602 Bambu Studio里怎么给模型开启树状支撑？"],
            "entity_swap": [
                "我想打一个手办，胳膊悬空的地方挺多，用的是Bambu Studio切片。",
                "悬空多的模型需要加支撑。Bambu Studio里有普通支撑和树状支撑两种，手办一般推荐树状的，省料也好拆。",
                "我还是想用前一种，怎么开？",
            ],
            "intent_reversal": ["Bambu Studio里怎么把模型的支撑关掉？它自己给我加上了"],
            "related_different": ["Bambu Studio里开了树状支撑以后，打印时间大概会多出多少？"],
        },
    }),
    # ------------------------------------------------------------------ 19
    ("accounting_software", {
        "en": {
            "cached": ["How do I turn on multicurrency in QuickBooks Online?"],
            "paraphrase": ["In QBO, where's the setting that lets me use foreign currencies for customers and invoices?"],
            "coreference": [
                "We just landed our first client in the UK, and I do our books in QuickBooks Online.",
                "Congrats! If you'll be billing them in pounds, you'll want the multicurrency feature.",
                "Yes, exactly. How do I turn that on?",
            ],
            "added_background": ["I'm a freelance designer and honestly accounting is not my thing, my accountant set everything up originally. How do I turn on multicurrency in QuickBooks Online?"],
            "entity_swap": ["How do I turn on multicurrency in QuickBooks Desktop?"],
            "intent_reversal": ["How do I turn off multicurrency in QuickBooks Online? We don't need it anymore."],
            "related_different": [
                "We use QuickBooks Online and just turned on multicurrency.",
                "Great - you can now assign currencies to customers, vendors and accounts.",
                "Can we still change our home currency after that?",
            ],
        },
        "zh": {
            "cached": [
                "我们公司用的是金蝶KIS云。",
                "好的，请问遇到什么问题了？",
                "已经审核的凭证怎么反审核？",
            ],
            "paraphrase": ["金蝶KIS云里凭证审核过了才发现有错，要怎么取消审核？"],
            "coreference": [
                "我们财务软件是金蝶KIS云，我刚审核完一张凭证，发现金额录错了。",
                "别担心，审核后的凭证不能直接修改，需要先撤销审核再改。",
                "那这张怎么反审核？",
            ],
            "added_background": [
                "我们公司用的是金蝶KIS云。",
                "好的，请问遇到什么问题了？",
                "我是新来的会计，前任走得急没交接清楚，头大\U0001f635 已经审核的凭证怎么反审核？",
            ],
            "entity_swap": [
                "我们公司用的是用友T3。",
                "好的，请问遇到什么问题了？",
                "已经审核的凭证怎么反审核？",
            ],
            "intent_reversal": [
                "我们公司用的是金蝶KIS云。",
                "好的，请问遇到什么问题了？",
                "录好的凭证怎么审核？",
            ],
            "related_different": [
                "我们公司用的是金蝶KIS云。",
                "好的，请问遇到什么问题了？",
                "反审核凭证需要开通什么权限？",
            ],
        },
    }),
    # ------------------------------------------------------------------ 20
    ("mobile_plan", {
        "en": {
            "cached": [
                "I'm flying to Mexico next week and I'm on Verizon.",
                "Nice! Do you want to be able to use your phone there?",
                "Yes - how do I turn on international roaming?",
            ],
            "paraphrase": ["Verizon customer heading to Mexico soon. What do I need to do to activate roaming so my phone works down there?"],
            "coreference": [
                "Heading to Cancun next week! My carrier is Verizon.",
                "Sounds fun! Want help making sure your phone works while you're there?",
                "Yes please. How do I turn on international roaming for my line?",
            ],
            "added_background": [
                "I'm flying to Mexico next week and I'm on Verizon.",
                "Nice! Do you want to be able to use your phone there?",
                "Yes, my mom panics if I don't text her every day lol. How do I turn on international roaming?",
            ],
            "entity_swap": [
                "I'm flying to Mexico next week and I'm on AT&T.",
                "Nice! Do you want to be able to use your phone there?",
                "Yes - how do I turn on international roaming?",
            ],
            "intent_reversal": [
                "I'm flying to Mexico next week and I'm on Verizon.",
                "Nice! Do you want to be able to use your phone there?",
                "No, I just want to be sure I don't get charged. How do I turn off international roaming?",
            ],
            "related_different": [
                "I'm flying to Mexico next week and I'm on Verizon.",
                "Nice! Do you want to be able to use your phone there?",
                "Yes - how much will international roaming cost per day?",
            ],
        },
        "zh": {
            "cached": ["中国移动的套餐想从128元降到58元，怎么办理？"],
            "paraphrase": ["移动的128套餐太贵了，流量根本用不完，想换成58的，该怎么操作？"],
            "coreference": [
                "我现在用的是中国移动128元的5G套餐，流量每个月都剩一大半。",
                "那可以考虑换个低一点的档位，比如58元档，更划算。",
                "嗯，那换到这个档位要怎么办理？",
            ],
            "added_background": ["最近在家办公，基本都连wifi，能省一点是一点。中国移动的套餐想从128元降到58元，怎么办理？"],
            "entity_swap": ["中国联通的套餐想从128元降到58元，怎么办理？"],
            "intent_reversal": [
                "我现在用的是中国移动58元的套餐，最近流量老是不够用。",
                "那可以考虑升到高一点的档位，比如128元档，流量多不少。",
                "嗯，那换到这个档位要怎么办理？",
            ],
            "related_different": ["中国移动的套餐从128元降到58元，是当月生效还是下个月生效？"],
        },
    }),
]


# --------------------------------------------------------------------------- #
# Building and checking.
# --------------------------------------------------------------------------- #

def _messages(texts: list[str], where: str) -> list[dict]:
    if not texts or len(texts) % 2 == 0:
        raise ValueError(f"{where}: a conversation must start and end with a user message")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where}: message {i} is empty")
        if len(text) >= MAX_CHARS:
            raise ValueError(f"{where}: message {i} has {len(text)} characters (limit {MAX_CHARS})")
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def build_cases() -> list[dict]:
    cases: list[dict] = []
    seen_ids: set[str] = set()
    seen_scenarios: set[str] = set()
    for scenario, langs in SCENARIOS:
        if scenario in seen_scenarios:
            raise ValueError(f"duplicate scenario {scenario}")
        seen_scenarios.add(scenario)
        if set(langs) != set(LANGS):
            raise ValueError(f"{scenario}: needs exactly the languages {LANGS}")
        for lang in LANGS:
            block = langs[lang]
            expected = {"cached"} | {c for c, _ in CATEGORIES}
            if set(block) != expected:
                raise ValueError(f"{scenario}/{lang}: keys {sorted(block)} != {sorted(expected)}")
            for category, should_hit in CATEGORIES:
                case_id = f"{scenario}/{lang}/{category}"
                entry = block[category]
                if isinstance(entry, dict):
                    context, cached = entry["context"], entry.get("cached", block["cached"])
                else:
                    context, cached = entry, block["cached"]
                if case_id in seen_ids:
                    raise ValueError(f"duplicate id {case_id}")
                seen_ids.add(case_id)
                cases.append({
                    "context": _messages(context, case_id + " context"),
                    "cached_context": _messages(cached, case_id + " cached_context"),
                    "category": category,
                    "should_hit": should_hit,
                    "lang": lang,
                    "id": case_id,
                })
    return cases


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    cases = build_cases()
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c, ensure_ascii=False, sort_keys=False) + "\n" for c in cases)
    out.write_text(text, encoding="utf-8")
    multi = sum(len(c["context"]) > 1 for c in cases)
    print(f"wrote {len(cases)} cases ({multi} with multi-turn context) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
