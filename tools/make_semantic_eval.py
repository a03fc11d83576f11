#!/usr/bin/env python3
"""Generate ``workbench/semantic/data/eval.jsonl``, the labelled evaluation set of the
context-aware semantic cache.

Pure standard library and deterministic (no randomness): the cases are hand-written below and
written out in a fixed order, so running the script twice gives a byte-identical file.

    python3 tools/make_semantic_eval.py

Each output line is one case::

    {"context": [...], "cached_context": [...], "category": ..., "should_hit": ...,
     "lang": "en" | "zh", "id": "<scenario>/<lang>/<category>"}

``cached_context`` is the conversation whose answer is already cached (its last user message is
the question that was answered); ``context`` is the new conversation (its last user message is the
current question); ``should_hit`` says whether the cached answer is right for the new question.

How the data below is written
-----------------------------
``SCENARIOS`` is a list of scenario dicts. Each has an ``id``, a ``domain`` and one block per
language (``"en"``, ``"zh"``). A language block holds:

* ``history`` (optional): an earlier exchange ``[user, assistant, ...]``; the marker ``HIST``
  inside a conversation expands to it.
* ``base``: the default cached conversation.
* one entry per category. An entry is either the new conversation (a list; the cached one is then
  ``base``) or a dict ``{"new": [...], "cached": [...]}`` when the cached conversation differs.

A conversation is a list of strings that alternate user / assistant, starting and ending with a
user message.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_PATH = ROOT / "workbench" / "semantic" / "data" / "eval.jsonl"

CATEGORIES = {
    "paraphrase": True,
    "coreference": True,
    "added_background": True,
    "entity_swap": False,
    "intent_reversal": False,
    "related_different": False,
}
LANGS = ("en", "zh")
MAX_CHARS = 300

HIST = "<<history>>"  # expands to the language block's "history" turns


SCENARIOS = [
    # ------------------------------------------------------------------ devops / deployment
    {
        "id": "deploy-billing",
        "domain": "devops/deployment",
        "en": {
            "history": [
                "we're on the new deploy pipeline now",
                "Right — deploys now go through the `shipit` CLI instead of the old Jenkins job.",
            ],
            "base": [HIST, "how do I deploy the billing service to staging with shipit?"],
            "paraphrase": ["What's the shipit command to push billing-service out to the staging environment?"],
            "coreference": [
                "Which services can shipit deploy at the moment?",
                "Currently billing-service, auth-service and the notifications worker.",
                "ok, how do I get the first one onto staging?",
            ],
            "added_background": [
                HIST,
                "cool. fyi it's my first week on the platform team and my lead wants a tiny fix out today, "
                "sorry if this is basic — how do I deploy the billing service to staging with shipit?",
            ],
            "entity_swap": [HIST, "how do I deploy the billing service to production with shipit?"],
            "intent_reversal": {
                "cached": [HIST, "how do I deploy the billing service to staging with shipit and have it run the db migrations as well?"],
                "new": [HIST, "how do I deploy the billing service to staging with shipit without running the db migrations?"],
            },
            "related_different": [HIST, "where can I see the deploy logs for the billing service on staging?"],
        },
        "zh": {
            "base": ["用 shipit 怎么把 billing 服务部署到 staging 环境？"],
            "paraphrase": ["billing 这个服务要用 shipit 发一版到 staging，具体怎么操作？"],
            "coreference": [
                "我们现在哪些服务是走 shipit 发布的？",
                "目前是 billing、auth 和通知 worker 这三个。",
                "第一个怎么发到 staging？",
            ],
            "added_background": [
                "不好意思打扰一下，我刚转到平台组，组长让我今天把一个小修复发出去。想问下用 shipit 怎么把 billing 服务部署到 staging 环境？"
            ],
            "entity_swap": [
                "我在改 auth 服务的登录超时。",
                "好的，改完记得先在 staging 上验证一下。",
                "用 shipit 怎么把 auth 服务部署到 staging 环境？",
            ],
            "intent_reversal": ["用 shipit 怎么把 billing 服务从 staging 环境下线？"],
            "related_different": ["用 shipit 部署 billing 服务到 staging 之后，部署记录在哪里看？"],
        },
    },
    # ------------------------------------------------------------------ cloud billing
    {
        "id": "cloud-billing",
        "domain": "cloud billing",
        "en": {
            "base": ["How do I set up a budget alert in the billing console that emails me when monthly spend passes $500?"],
            "paraphrase": ["I want an email whenever our cloud costs for the month go over 500 dollars. Where do I configure that in billing?"],
            "coreference": [
                "Is there any way to get warned about costs before the invoice arrives?",
                "Yes — in the billing console you can create a budget alert that emails you when spend crosses a threshold.",
                "how do I set one up for $500 a month?",
            ],
            "added_background": [
                "Finance keeps pinging me about surprise charges and honestly I'm a frontend dev, not a cloud person. "
                "Anyway, how do I get the billing console to email me once our monthly spend goes past $500?"
            ],
            "entity_swap": [
                "We got hit with a big egress charge last month.",
                "Ouch. Data transfer out is billed per GB, so it can add up quickly.",
                "How do I set up an alert in the billing console that emails me when monthly data transfer passes 500 GB?",
            ],
            "intent_reversal": ["How do I stop the billing console from emailing me budget alerts when monthly spend passes $500?"],
            "related_different": ["How do I export the monthly spend report from the billing console as a CSV?"],
        },
        "zh": {
            "history": [
                "我们的云资源都打了 project 标签。",
                "好的，打了标签之后，账单就可以按标签来分组统计了。",
            ],
            "base": [HIST, "怎么在账单里按项目看每个月花了多少钱？"],
            "paraphrase": ["想按项目拆分一下每月的云费用，账单页面哪里能看到？资源都有 project 标签。"],
            "coreference": [
                "账单能按标签分组吗？我们每个资源都有 project 标签。",
                "可以的，在费用分析里选择按标签维度分组即可。",
                "那按这个标签看每个项目每个月的费用，具体怎么操作？",
            ],
            "added_background": [
                HIST,
                "老板下午开会要看数据，我临时被拉来整理，之前完全没碰过云账单😂 怎么在账单里按项目看每个月花了多少钱？",
            ],
            "entity_swap": [HIST, "怎么在账单里按地域看每个月花了多少钱？"],
            "intent_reversal": {
                "cached": ["费用中心里怎么给财务同事开通账单的只读权限？"],
                "new": ["费用中心里怎么收回财务同事查看账单的只读权限？"],
            },
            "related_different": [HIST, "账单对应的发票怎么申请？要开增值税专票。"],
        },
    },
    # ------------------------------------------------------------------ databases
    {
        "id": "db-schema",
        "domain": "databases",
        "en": {
            "base": ["How do I add an index on the email column of the users table in Postgres without locking writes?"],
            "paraphrase": ["Postgres: what's the way to create an index on users.email that doesn't block inserts and updates while it builds?"],
            "coreference": [
                "Our users table has about 40M rows and most lookups filter on email.",
                "At that size an index on email will help a lot, but a plain CREATE INDEX blocks writes while it builds.",
                "right, so how do I add it without locking writes?",
            ],
            "added_background": [
                "We had a small outage last week and now I'm apparently 'the database person' lol. "
                "In Postgres, how do I add an index on the email column of the users table without locking writes?"
            ],
            "entity_swap": ["How do I add an index on the email column of the users table in MySQL without locking writes?"],
            "intent_reversal": ["How do I drop the index on the email column of the users table in Postgres without locking writes?"],
            "related_different": [
                "Our users table has about 40M rows and most lookups filter on email.",
                "At that size an index on email will help a lot, but a plain CREATE INDEX blocks writes while it builds.",
                "how do I check whether postgres is actually using the email index in my queries?",
            ],
        },
        "zh": {
            "base": ["MySQL 里怎么给 orders 表加一个 created_at 字段，默认值是当前时间？"],
            "paraphrase": ["orders 表想新增一列 created_at，默认取当前时间，MySQL 的 SQL 该怎么写？"],
            "coreference": [
                "orders 表现在没有记录创建时间的字段。",
                "那建议加一个 created_at 列，类型用 DATETIME 或 TIMESTAMP 都可以。",
                "好，这个字段怎么加？默认值要当前时间",
            ],
            "added_background": [
                "我是做前端的，后端同事请假了，需求又比较急，只能硬着头皮自己改库了……"
                "想问下 MySQL 里给 orders 表加个 created_at 字段、默认当前时间，语句怎么写？"
            ],
            "entity_swap": [
                "我们库里有 orders 和 users 两张表。",
                "好的，需要对哪张表做调整？",
                "MySQL 里怎么给 users 表加一个 created_at 字段，默认值是当前时间？",
            ],
            "intent_reversal": ["MySQL 里怎么把 orders 表的 created_at 字段删掉？"],
            "related_different": ["MySQL 里怎么给 orders 表的 created_at 字段加索引？"],
        },
    },
    # ------------------------------------------------------------------ logging
    {
        "id": "logging",
        "domain": "logging",
        "en": {
            "history": [
                "We use Python's logging module in our Flask app.",
                "OK — then you can configure handlers and formatters in one place with logging.config.dictConfig.",
            ],
            "base": [HIST, "How do I make it write logs to a file instead of the console?"],
            "paraphrase": [
                "Flask app, standard Python logging. Right now everything goes to stdout — what do I change so the logs end up in a file?"
            ],
            "coreference": [
                "Our Flask app just uses the built-in logging module, nothing fancy.",
                "Got it, so basicConfig or dictConfig will cover everything you need.",
                "can it send the logs to a file rather than the terminal? how?",
            ],
            "added_background": [
                "Hey, quick one. I inherited this Flask app from a contractor who left last month and there's zero documentation. "
                "It uses Python's logging module — how do I make it write logs to a file instead of the console?"
            ],
            "entity_swap": [
                "We use loguru in our Flask app.",
                "OK — with loguru you attach sinks via logger.add(), each with its own format and level.",
                "How do I make it write logs to a file instead of the console?",
            ],
            "intent_reversal": [HIST, "How do I stop it from writing logs to a file and just keep the console output?"],
            "related_different": [HIST, "How do I rotate the log files daily and keep only the last 7?"],
        },
        "zh": {
            "base": ["Nginx 的 access_log 怎么按天切割？"],
            "paraphrase": ["想让 nginx 的访问日志每天自动生成一个新文件，要怎么配？"],
            "coreference": [
                "nginx 的访问日志现在一个文件已经 20 多 G 了。",
                "这么大确实该处理了，可以用 logrotate，或者在路径里用日期变量来切分。",
                "那它怎么按天切？",
            ],
            "added_background": [
                "运维同事离职了，交接文档里啥也没写，服务器磁盘又快满了，有点慌。请问 Nginx 的 access_log 怎么按天切割？"
            ],
            "entity_swap": ["Nginx 的 access_log 怎么按小时切割？"],
            "intent_reversal": {
                "cached": ["nginx 里 /api 这个 location 想单独记访问日志，怎么开？"],
                "new": ["nginx 里 /api 这个 location 不想记访问日志了，怎么关？"],
            },
            "related_different": [
                "nginx 的访问日志现在一个文件已经 20 多 G 了。",
                "这么大确实该处理了，可以用 logrotate，或者在路径里用日期变量来切分。",
                "access_log 怎么自定义格式，把请求耗时也加进去？",
            ],
        },
    },
    # ------------------------------------------------------------------ API keys
    {
        "id": "api-keys",
        "domain": "API keys",
        "en": {
            "base": ["How do I rotate my API key without breaking the apps that use it?"],
            "paraphrase": ["What's the safest way to swap in a new API key so the integrations that depend on the old one keep working?"],
            "coreference": [
                "One API key is shared by our mobile app and two backend jobs.",
                "That's common, but it does make rotation riskier since all three depend on the same key.",
                "so how do I rotate it without breaking any of them?",
            ],
            "added_background": [
                "Security flagged our key during the audit because it's over a year old, which is why I'm asking. "
                "How do I rotate my API key without breaking the apps that use it?"
            ],
            "entity_swap": ["How do I rotate my webhook signing secret without breaking the apps that use it?"],
            "intent_reversal": {
                "cached": ["In the dashboard, how do I add the write:orders scope to an existing API key?"],
                "new": ["In the dashboard, how do I remove the write:orders scope from an existing API key?"],
            },
            "related_different": [
                "One API key is shared by our mobile app and two backend jobs.",
                "That's common, but it does make rotation riskier since all three depend on the same key.",
                "how do I see how many requests each of them made with it this week?",
            ],
        },
        "zh": {
            "history": [
                "我刚才不小心把 .env 推到了 GitHub 公开仓库，里面有 API 密钥。",
                "建议马上处理，公开仓库里的密钥几分钟内就可能被自动扫描到。",
            ],
            "base": [HIST, "怎么让这个密钥立刻失效？"],
            "paraphrase": ["API 密钥不小心提交到 GitHub 公开仓库了，要怎么马上把它作废掉？"],
            "coreference": [
                "出大事了，我把带 API key 的配置文件 push 到公开仓库了",
                "先别慌，第一步是把这个 key 作废，然后再清理提交历史。",
                "第一步具体怎么做？",
            ],
            "added_background": [
                HIST,
                "说来惭愧，实习第二天就闯祸了，导师在开会联系不上😭 那这个密钥要怎么马上作废？",
            ],
            "entity_swap": [
                "我刚才不小心把 .env 推到了 GitHub 公开仓库，里面有数据库密码。",
                "建议马上处理，公开仓库里的凭据几分钟内就可能被自动扫描到。",
                "怎么让这个密码立刻失效？",
            ],
            "intent_reversal": {
                "cached": ["API Key 怎么加上 IP 白名单限制？"],
                "new": ["API Key 的 IP 白名单限制怎么去掉？"],
            },
            "related_different": [HIST, "怎么把它从 git 提交历史里彻底删掉？"],
        },
    },
    # ------------------------------------------------------------------ Kubernetes
    {
        "id": "k8s",
        "domain": "Kubernetes",
        "en": {
            "base": ["How do I restart a deployment in Kubernetes without downtime?"],
            "paraphrase": ["what's the zero-downtime way to bounce all the pods of a k8s deployment?"],
            "coreference": [
                "we run the checkout API as a Deployment with 4 replicas",
                "With 4 replicas, a rolling restart will keep it available the whole time.",
                "how do I actually trigger one?",
            ],
            "added_background": [
                "hey, I'm new on the team and coming from Docker Compose, so bear with me",
                "Welcome! Happy to help — ask away.",
                "How do I restart a deployment in Kubernetes without downtime?",
            ],
            "entity_swap": [
                "we run the checkout API as a Deployment with 4 replicas",
                "With 4 replicas, a rolling restart will keep it available the whole time.",
                "how do I restart a single pod in Kubernetes without downtime?",
            ],
            "intent_reversal": {
                "cached": [
                    "we're rolling out v2.3 of the web deployment right now",
                    "OK — you can follow it with kubectl rollout status.",
                    "How do I pause the rollout?",
                ],
                "new": [
                    "we're rolling out v2.3 of the web deployment right now",
                    "OK — you can follow it with kubectl rollout status.",
                    "How do I resume the rollout I paused earlier?",
                ],
            },
            "related_different": ["How do I find out why a deployment in Kubernetes keeps restarting?"],
        },
        "zh": {
            "history": [
                "我们有个 Pod 一直在 CrashLoopBackOff。",
                "这通常是容器启动后很快就退出了，先看日志找原因。",
            ],
            "base": [HIST, "它上一次崩溃的日志怎么看？现在 kubectl logs 只显示新启动的"],
            "paraphrase": ["pod 反复重启，想看它挂掉之前那一次容器的输出，kubectl logs 要加什么参数？"],
            "coreference": {
                "cached": ["K8s 的 Pod 一直 CrashLoopBackOff，怎么看上一次崩溃的日志？"],
                "new": [HIST, "它上一次崩溃的日志怎么看？现在 kubectl logs 只显示新启动的"],
            },
            "added_background": [HIST, "周末第一次值班就碰上这种告警，手有点抖🥲 它上一次崩溃的日志怎么看？"],
            "entity_swap": [HIST, "它三天前那次崩溃的日志怎么看？"],
            "intent_reversal": {
                "cached": ["K8s 怎么给节点打污点，让 Pod 不调度到上面？"],
                "new": ["K8s 怎么去掉节点上的污点，让 Pod 可以重新调度上去？"],
            },
            "related_different": [HIST, "怎么进到这个容器里面排查？它起来没几秒就挂了"],
        },
    },
    # ------------------------------------------------------------------ CI pipelines
    {
        "id": "ci-pipelines",
        "domain": "CI pipelines",
        "en": {
            "history": [
                "Our CI runs on GitHub Actions.",
                "Nice — workflows live under .github/workflows as YAML files.",
            ],
            "base": [HIST, "How do I cache pip dependencies between runs?"],
            "paraphrase": [
                "GitHub Actions reinstalls every Python package from scratch on each run. "
                "Is there a way to keep the pip downloads around between workflow runs?"
            ],
            "coreference": [
                "We run pytest in GitHub Actions and the install step alone takes 4 minutes.",
                "Most of that is usually pip downloading packages; caching them helps a lot.",
                "ok how do i set that up?",
            ],
            "added_background": [
                HIST,
                "My manager is grumbling about our Actions minutes bill, which is the only reason I'm looking at this haha. "
                "How do I cache pip dependencies between runs?",
            ],
            "entity_swap": [
                "Our CI runs on GitLab CI.",
                "Nice — pipelines are defined in .gitlab-ci.yml at the repo root.",
                "How do I cache pip dependencies between runs?",
            ],
            "intent_reversal": [HIST, "How do I make sure pip dependencies are never cached between runs? I want a clean install every time."],
            "related_different": [HIST, "How do I run the tests on Python 3.10, 3.11 and 3.12 in parallel?"],
        },
        "zh": {
            "base": ["Jenkins 流水线怎么设置只在 main 分支上触发？"],
            "paraphrase": ["只想让 main 分支的提交跑 Jenkins pipeline，其他分支都不跑，这个在哪配？"],
            "coreference": [
                "我们用 Jenkins 多分支流水线，现在每个 feature 分支都会触发构建。",
                "多分支流水线默认会给扫描到的每个分支都建一个 job。",
                "能不能只让 main 触发它？怎么设置？",
            ],
            "added_background": [
                "构建队列每天都排长队，大家在群里天天吐槽，组长让我看看能不能优化一下。Jenkins 流水线怎么设置只在 main 分支上触发？"
            ],
            "entity_swap": ["Jenkins 流水线怎么设置只在 release/* 分支上触发？"],
            "intent_reversal": ["Jenkins 流水线怎么设置成 main 分支上不触发，其他分支照常？"],
            "related_different": [
                "我们用 Jenkins 多分支流水线，现在每个 feature 分支都会触发构建。",
                "多分支流水线默认会给扫描到的每个分支都建一个 job。",
                "main 分支构建失败的时候怎么自动发邮件通知？",
            ],
        },
    },
    # ------------------------------------------------------------------ online shop support
    {
        "id": "shop-support",
        "domain": "customer support for an online shop",
        "en": {
            "base": ["Can I change the delivery address after my order has shipped?"],
            "paraphrase": ["My parcel's already been sent out — is it still possible to redirect it to a different address?"],
            "coreference": [
                "my order shipped this morning",
                "Thanks! You'll get a tracking email shortly with the courier details.",
                "can i still change the address on it?",
            ],
            "added_background": [
                "Hello! I'm moving flat this weekend and it's total chaos, boxes everywhere.",
                "Oh, good luck with the move! How can I help today?",
                "Can I change the delivery address after my order has shipped?",
            ],
            "entity_swap": ["Can I change the payment method after my order has shipped?"],
            "intent_reversal": {
                "cached": [
                    "I placed an order about ten minutes ago.",
                    "Thanks, I can see it — it hasn't been packed yet.",
                    "Can I add another item to it?",
                ],
                "new": [
                    "I placed an order about ten minutes ago.",
                    "Thanks, I can see it — it hasn't been packed yet.",
                    "Can I remove one of the items from it?",
                ],
            },
            "related_different": [
                "my order shipped this morning",
                "Thanks! You'll get a tracking email shortly with the courier details.",
                "how long does delivery usually take once it's shipped?",
            ],
        },
        "zh": {
            "base": ["下单的时候优惠券忘记用了，还能补吗？"],
            "paraphrase": ["付完款才发现有张券没抵扣，现在还有办法补用上吗？"],
            "coreference": [
                "我刚下了一单，付了 268。",
                "好的，订单已经收到啦，请问有什么可以帮您？",
                "刚才那单忘了用优惠券，还能补吗？",
            ],
            "added_background": [
                "你好呀，我是你们家老顾客了，每次换季都会来囤一波～",
                "感谢亲一直以来的支持！有什么可以帮您的吗？",
                "下单的时候优惠券忘记用了，还能补吗？",
            ],
            "entity_swap": ["下单的时候积分忘记用了，还能补吗？"],
            "intent_reversal": {
                "cached": ["已经下单了，能不能再加一件同款？"],
                "new": ["已经下单了，能不能去掉其中一件？"],
            },
            "related_different": [
                "我刚下了一单，付了 268。",
                "好的，订单已经收到啦，请问有什么可以帮您？",
                "为什么我的优惠券显示不可用？",
            ],
        },
    },
    # ------------------------------------------------------------------ coffee equipment orders
    {
        "id": "coffee-orders",
        "domain": "coffee-equipment orders",
        "en": {
            "history": [
                "I ordered the Barista Pro espresso machine last week.",
                "Thanks for your order! It's scheduled to arrive within 5 business days.",
            ],
            "base": [HIST, "Does it come with a milk frothing jug or do I need to buy one?"],
            "paraphrase": ["Is a milk jug included in the Barista Pro box, or is that sold separately?"],
            "coreference": [
                "Quick question about the Barista Pro I ordered.",
                "Sure, happy to help with your Barista Pro.",
                "is there a frothing jug in the box with it?",
            ],
            "added_background": [
                HIST,
                "Great. It's a birthday present for my partner, who is obsessed with flat whites, so I want everything "
                "ready on the day. Will there be a milk jug in the box, or should I pick one up separately?",
            ],
            "entity_swap": [
                "I ordered the Barista Express espresso machine last week.",
                "Thanks for your order! It's scheduled to arrive within 5 business days.",
                "Does it come with a milk frothing jug or do I need to buy one?",
            ],
            "intent_reversal": {
                "cached": [HIST, "Can I add the grinder bundle to that order?"],
                "new": [HIST, "Can I take the grinder bundle off that order?"],
            },
            "related_different": [HIST, "How often will I need to descale it?"],
        },
        "zh": {
            "base": ["请问定制刻字的咖啡杯下单后多久能发货？"],
            "paraphrase": ["刻字款的咖啡杯，一般下完单几天能寄出？"],
            "coreference": [
                "你们家的咖啡杯可以刻名字吗？",
                "可以的，刻字款最多支持 10 个字符，下单时在备注里填写就行。",
                "那这种下单后多久能发货？",
            ],
            "added_background": ["朋友下个月生日，想送个有纪念意义的小礼物，所以提前来问一下～请问定制刻字的咖啡杯下单后多久能发货？"],
            "entity_swap": ["请问定制刻字的咖啡杯一次下 200 个的话，多久能发货？"],
            "intent_reversal": {
                "cached": [
                    "我昨天下单了一台磨豆机。",
                    "收到，您的订单目前还没出库。",
                    "能不能再加购一包滤纸？",
                ],
                "new": [
                    "我昨天下单了一台磨豆机。",
                    "收到，您的订单目前还没出库。",
                    "订单里加购的那包滤纸能不能不要了？",
                ],
            },
            "related_different": [
                "你们家的咖啡杯可以刻名字吗？",
                "可以的，刻字款最多支持 10 个字符，下单时在备注里填写就行。",
                "刻了字的还能退换吗？",
            ],
        },
    },
    # ------------------------------------------------------------------ travel booking
    {
        "id": "travel-booking",
        "domain": "travel booking",
        "en": {
            "base": ["Can I change the date on my flight to Lisbon without paying a fee?"],
            "paraphrase": ["Is it possible to move my Lisbon flight to another day for free, or is there a change charge?"],
            "coreference": [
                "I've got a flight booked to Lisbon on the 14th.",
                "I can see your booking — economy, departing on the 14th at 09:40.",
                "can I move it to a different date without a fee?",
            ],
            "added_background": [
                "My sister just announced she's getting married the same week, so all our plans are up in the air. "
                "Can I change the date on my flight to Lisbon without paying a fee?"
            ],
            "entity_swap": {
                "cached": [
                    "I'm booked on the Flex fare to Lisbon.",
                    "Thanks, I've found your Flex booking.",
                    "can I change the date without paying a fee?",
                ],
                "new": [
                    "I'm booked on the Basic fare to Lisbon.",
                    "Thanks, I've found your Basic booking.",
                    "can I change the date without paying a fee?",
                ],
            },
            "intent_reversal": {
                "cached": ["How do I add travel insurance to my Lisbon booking?"],
                "new": ["How do I remove the travel insurance from my Lisbon booking?"],
            },
            "related_different": ["Can I cancel my flight to Lisbon and get a refund?"],
        },
        "zh": {
            "history": [
                "我订了 5 月 3 号入住的酒店，住两晚。",
                "查到您的订单了，是大床房，含双早。",
            ],
            "base": [HIST, "能不能改成 5 月 4 号入住？"],
            "paraphrase": ["酒店订的是 5 月 3 号入住两晚，我想把入住往后挪一天，改到 4 号，可以吗？"],
            "coreference": [
                "我有个酒店订单，5 月 3 号入住两晚，大床房。",
                "好的，查到了，请问需要什么帮助？",
                "它的入住日期能往后推一天吗？",
            ],
            "added_background": [HIST, "临时要加班走不开，真的不好意思给你们添麻烦了。入住能往后延一天，改成 4 号吗？"],
            "entity_swap": [HIST, "能不能改成 6 月 4 号入住？"],
            "intent_reversal": {
                "cached": [HIST, "能不能再加住一晚？"],
                "new": [HIST, "能不能少住一晚？"],
            },
            "related_different": [HIST, "最早几点可以办入住？"],
        },
    },
    # ------------------------------------------------------------------ banking / cards
    {
        "id": "banking-cards",
        "domain": "banking/cards",
        "en": {
            "base": ["How do I freeze my debit card in the app?"],
            "paraphrase": ["where in the banking app can I temporarily lock my debit card?"],
            "coreference": {
                "cached": [
                    "I think I've misplaced my debit card somewhere in the flat.",
                    "If it's most likely just misplaced, freezing it for now beats cancelling it outright.",
                    "ok, how do I do that in the app?",
                ],
                "new": [
                    "I can't find my debit card, it's probably somewhere at home.",
                    "If you think it's just misplaced, a temporary freeze is a better option than cancelling it.",
                    "ok, how do I do that in the app?",
                ],
            },
            "added_background": [
                "This is probably a silly question, but I've been travelling a lot for work lately and I'm paranoid about my cards. "
                "How do I freeze my debit card in the app?"
            ],
            "entity_swap": {
                "cached": ["What's the daily ATM withdrawal limit on the Standard account?"],
                "new": ["What's the daily ATM withdrawal limit on the Premium account?"],
            },
            "intent_reversal": [
                "I can't find my debit card, it's probably somewhere at home.",
                "If you think it's just misplaced, a temporary freeze is a better option than cancelling it.",
                "found it in my coat pocket! how do I unfreeze it in the app?",
            ],
            "related_different": ["How do I order a replacement debit card in the app?"],
        },
        "zh": {
            "base": ["信用卡怎么开通境外交易？"],
            "paraphrase": ["我的信用卡想在国外也能刷，要去哪里开这个功能？"],
            "coreference": [
                "下周出国，带的是你们行的信用卡。",
                "好的，出国前建议确认一下卡片的境外交易功能是否已经开通。",
                "这个要怎么开？",
            ],
            "added_background": [
                "您好，我是第一次出国，家里人都说要提前把银行卡弄好，不然到了那边会很麻烦。想问一下信用卡怎么开通境外交易？"
            ],
            "entity_swap": ["借记卡怎么开通境外交易？"],
            "intent_reversal": ["信用卡怎么关闭境外交易？回国了用不上了"],
            "related_different": [
                "下周出国，带的是你们行的信用卡。",
                "好的，出国前建议确认一下卡片的境外交易功能是否已经开通。",
                "在国外刷卡的手续费是多少？",
            ],
        },
    },
    # ------------------------------------------------------------------ HR / leave policy
    {
        "id": "hr-leave",
        "domain": "HR/leave policy",
        "en": {
            "base": ["How many days of annual leave can I carry over into next year?"],
            "paraphrase": ["If I don't use all my vacation days this year, how many of them roll over?"],
            "coreference": [
                "I still have 9 days of annual leave left and it's already November.",
                "You've still got time to book them, but do check the carry-over rules.",
                "right — how many of them can I take into next year?",
            ],
            "added_background": [
                "Hi HR team! Had a crazy year with the product launch and barely took any time off 😅 "
                "How many days of annual leave can I carry over into next year?"
            ],
            "entity_swap": ["How many days of sick leave can I carry over into next year?"],
            "intent_reversal": {
                "cached": ["Can I buy extra annual leave days through payroll?"],
                "new": ["Can I sell unused annual leave days back through payroll?"],
            },
            "related_different": [
                "I still have 9 days of annual leave left and it's already November.",
                "You've still got time to book them, but do check the carry-over rules.",
                "how do I book them in the HR portal?",
            ],
        },
        "zh": {
            "history": [
                "我在公司工作满三年了。",
                "恭喜！满三年之后有几项福利会有变化。",
            ],
            "base": [HIST, "那现在年假有几天？"],
            "paraphrase": ["我入职刚好满 3 年，请问今年能休几天年假？"],
            "coreference": [
                "想了解下年假的规定。",
                "好的，年假天数是和司龄挂钩的，您想了解哪方面？",
                "像我这种入职满三年的，能有几天？",
            ],
            "added_background": [HIST, "我打算带爸妈出去旅游一趟，他们年纪大了，想早点规划。那现在年假有几天？"],
            "entity_swap": [
                "我在公司工作满五年了。",
                "恭喜！满五年之后有几项福利会有变化。",
                "那现在年假有几天？",
            ],
            "intent_reversal": {
                "cached": ["OA 里怎么给请假审批加一个抄送人？"],
                "new": ["OA 里怎么把请假审批的抄送人删掉？"],
            },
            "related_different": [HIST, "年假可以拆成半天半天地休吗？"],
        },
    },
    # ------------------------------------------------------------------ insurance claims
    {
        "id": "insurance-claims",
        "domain": "insurance claims",
        "en": {
            "base": ["What documents do I need to submit a claim for a cracked phone screen?"],
            "paraphrase": ["My phone screen cracked and I want to claim on my gadget insurance — what paperwork do you need from me?"],
            "coreference": [
                "I dropped my phone and the screen cracked. It's on my gadget policy.",
                "Sorry to hear that! Accidental damage like a cracked screen is covered on your plan.",
                "what documents do I need to claim for it?",
            ],
            "added_background": [
                "Long story short, my toddler launched my phone off the sofa onto the tiles 🙃 "
                "What do I have to send you to claim for the cracked screen?"
            ],
            "entity_swap": ["What documents do I need to submit a claim for a stolen phone?"],
            "intent_reversal": {
                "cached": ["How do I add my partner's laptop to my gadget policy?"],
                "new": ["How do I remove my partner's laptop from my gadget policy?"],
            },
            "related_different": [
                "I dropped my phone and the screen cracked. It's on my gadget policy.",
                "Sorry to hear that! Accidental damage like a cracked screen is covered on your plan.",
                "how long does a claim like that usually take to pay out?",
            ],
        },
        "zh": {
            "base": ["车被追尾了，对方全责，理赔需要准备什么材料？"],
            "paraphrase": ["我的车让人从后面撞了，责任全在对方，走理赔要带哪些资料？"],
            "coreference": [
                "今天早上在路口等红灯，被后车追尾了。",
                "人没事就好！交警那边责任认定了吗？",
                "认定了，对方全责。这种情况理赔要准备啥材料？",
            ],
            "added_background": [
                "第一次遇到这种事，现在还有点懵，家里人也不太懂，只能上来问问。车被追尾了，对方全责，理赔需要准备什么材料？"
            ],
            "entity_swap": ["车被追尾了，双方同责，理赔需要准备什么材料？"],
            "intent_reversal": {
                "cached": ["车险续保的时候能加上玻璃单独破碎险吗？"],
                "new": ["车险续保的时候能把玻璃单独破碎险去掉吗？"],
            },
            "related_different": [
                "今天早上在路口等红灯，被后车追尾了。",
                "人没事就好！交警那边责任认定了吗？",
                "认定了，对方全责。理赔款一般多久能到账？",
            ],
        },
    },
    # ------------------------------------------------------------------ smart-home devices
    {
        "id": "smart-home",
        "domain": "smart-home devices",
        "en": {
            "base": ["How do I make the hallway lights turn on automatically at sunset?"],
            "paraphrase": ["is there a way to have the hallway lamps switch on by themselves when the sun goes down?"],
            "coreference": [
                "I just added the hallway lights to the Home app.",
                "Great, they should now show up under the Hallway room.",
                "can they come on automatically at sunset? how?",
            ],
            "added_background": [
                "We just got a puppy and she's scared of the dark hallway at night, poor thing. "
                "How do I make the hallway lights turn on automatically at sunset?"
            ],
            "entity_swap": [
                "I just added the hallway lights to the Home app.",
                "Great, they should now show up under the Hallway room.",
                "How do I make them turn on automatically at 7 pm every day?",
            ],
            "intent_reversal": ["How do I make sure the hallway lights do not turn on automatically at sunset anymore?"],
            "related_different": ["How do I make the hallway lights dim to 30% after 11 pm?"],
        },
        "zh": {
            "history": [
                "家里装了小米的智能门锁。",
                "好的，门锁可以在米家 App 里统一管理。",
            ],
            "base": [HIST, "怎么给保姆添加一个临时密码？"],
            "paraphrase": ["米家的门锁，想给阿姨设一个临时用的开门密码，在哪里设置？"],
            "coreference": [
                "米家 App 里能管理门锁吗？",
                "可以的，门锁绑定后就会出现在设备列表里。",
                "那它怎么给保姆加个临时密码？",
            ],
            "added_background": [
                HIST,
                "下周我和老公都要出差，家里老人带孩子忙不过来，所以请了个保姆。怎么给保姆添加一个临时密码？",
            ],
            "entity_swap": [
                "家里装的是 Aqara 的智能门锁。",
                "好的，Aqara 门锁可以在 Aqara Home App 里管理。",
                "怎么给保姆添加一个临时密码？",
            ],
            "intent_reversal": [HIST, "保姆的临时密码怎么删掉？她下周就不来了"],
            "related_different": [HIST, "门锁没电了怎么开门？"],
        },
    },
    # ------------------------------------------------------------------ mobile app settings
    {
        "id": "mobile-settings",
        "domain": "mobile app settings",
        "en": {
            "base": ["How do I turn on dark mode in the Android app?"],
            "paraphrase": ["the android app is blinding me at night lol, where's the setting for the dark theme?"],
            "coreference": [
                "I'm using your Android app on a Pixel 8.",
                "Thanks, that device is fully supported. What can I help with?",
                "does it have a dark mode? how do I switch it on?",
            ],
            "added_background": [
                "Love the app btw, I've used it daily since last spring — my eyes just get tired in the evenings. "
                "How do I turn on dark mode in the Android app?"
            ],
            "entity_swap": ["How do I turn on dark mode in the iOS app?"],
            "intent_reversal": [
                "I'm using your Android app on a Pixel 8.",
                "Thanks, that device is fully supported. What can I help with?",
                "dark mode switched on by itself after the update — how do I turn it off?",
            ],
            "related_different": ["How do I change the font size in the Android app?"],
        },
        "zh": {
            "base": ["App 里怎么把消息推送的声音关掉，但通知还要保留？"],
            "paraphrase": ["通知我还是想收的，就是不想它每次都响，App 里有这个设置吗？"],
            "coreference": {
                "cached": [
                    "你们 App 推送太频繁了，手机一直在响。",
                    "不好意思打扰到您，推送的提醒方式可以在设置里自己调。",
                    "那声音能单独关掉吗？通知还是要的",
                ],
                "new": [
                    "你们 App 的推送一天要响好多次。",
                    "抱歉打扰到您了，推送的提醒方式是可以调整的。",
                    "那声音能单独关掉吗？通知还是要的",
                ],
            },
            "added_background": ["我晚上要哄娃睡觉，手机一响就前功尽弃😭 App 里怎么把消息推送的声音关掉，但通知还要保留？"],
            "entity_swap": ["App 里怎么把消息推送的震动关掉，但通知还要保留？"],
            "intent_reversal": ["App 里怎么打开消息推送的声音？现在来通知一点动静都没有"],
            "related_different": [
                "你们 App 的推送一天要响好多次。",
                "抱歉打扰到您了，推送的提醒方式是可以调整的。",
                "能不能设置成晚上 11 点以后就不推送了？",
            ],
        },
    },
    # ------------------------------------------------------------------ education / course enrolment
    {
        "id": "course-enrolment",
        "domain": "education/course enrolment",
        "en": {
            "base": ["What's the last day I can drop CS 201 and still get a full refund?"],
            "paraphrase": ["Until when can I withdraw from CS 201 without losing any of the tuition?"],
            "coreference": [
                "I enrolled in CS 201 for spring but I'm completely overloaded.",
                "That happens — you have a few options, including dropping the course.",
                "what's the last day to drop it with a full refund?",
            ],
            "added_background": [
                "I'm a mature student juggling a part-time job and two kids, so this term has been brutal. "
                "What's the last day I can drop CS 201 and still get a full refund?"
            ],
            "entity_swap": ["What's the last day I can drop CS 201 and still get a 50% refund?"],
            "intent_reversal": ["What's the last day I can add CS 201 to my schedule?"],
            "related_different": [
                "I enrolled in CS 201 for spring but I'm completely overloaded.",
                "That happens — you have a few options, including dropping the course.",
                "if I drop it, will it show up on my transcript?",
            ],
        },
        "zh": {
            "base": ["这学期的公选课最晚哪天可以退选？"],
            "paraphrase": ["公选课要是想退掉，这学期截止到什么时候？"],
            "coreference": [
                "我这学期选了一门公选课《电影鉴赏》，发现跟实习时间冲突了。",
                "理解，可以考虑退选，或者看看有没有别的上课时段。",
                "退的话最晚哪天？",
            ],
            "added_background": [
                "老师您好，我是大二的学生，这学期课比较多，还在准备四级，压力有点大。想问一下公选课退选截止到哪一天？"
            ],
            "entity_swap": ["这学期的专业必修课最晚哪天可以退选？"],
            "intent_reversal": ["这学期的公选课最晚哪天可以补选？"],
            "related_different": ["这学期的公选课退选了会影响绩点吗？"],
        },
    },
    # ------------------------------------------------------------------ healthcare appointments
    {
        "id": "clinic-appointments",
        "domain": "healthcare appointments",
        "en": {
            "base": ["How do I reschedule my appointment with Dr. Patel to next week?"],
            "paraphrase": ["I need to push my Dr. Patel visit back a week — what's the process for moving it?"],
            "coreference": [
                "I have a check-up booked with Dr. Patel this Thursday.",
                "I can see it — Thursday at 10:15 at the Riverside clinic.",
                "can I move it to next week? how?",
            ],
            "added_background": [
                "Sorry for the hassle, work just scheduled a mandatory offsite on the same day. "
                "How do I reschedule my appointment with Dr. Patel to next week?"
            ],
            "entity_swap": ["How do I reschedule my appointment with Dr. Okafor to next week?"],
            "intent_reversal": {
                "cached": ["How do I turn on text reminders for my appointments?"],
                "new": ["How do I stop getting text reminders for my appointments?"],
            },
            "related_different": ["Do I need a referral before my appointment with Dr. Patel next week?"],
        },
        "zh": {
            "history": [
                "我在你们医院 App 上挂了周五上午皮肤科的号。",
                "好的，已为您查到周五上午 9:30 皮肤科的预约。",
            ],
            "base": [HIST, "去了以后要先取号，还是直接去诊室？"],
            "paraphrase": ["在 App 上约了周五上午的皮肤科，到医院后是得先去自助机取号，还是可以直接去诊室外面等？"],
            "coreference": [
                "请问周五上午皮肤科的号还有吗？",
                "还有的，已帮您在 App 上预约成功，周五上午 9:30。",
                "好的，那到时候要先取号还是直接去诊室？",
            ],
            "added_background": [HIST, "我是陪我妈去，她腿脚不太方便，不想让她来回跑。去了以后要先取号，还是直接去诊室？"],
            "entity_swap": [
                "我是打电话挂的周五上午皮肤科的号。",
                "好的，已为您查到周五上午 9:30 皮肤科的预约。",
                "去了以后要先取号，还是直接去诊室？",
            ],
            "intent_reversal": {
                "cached": [HIST, "能帮我再加一个周六的复诊号吗？"],
                "new": [HIST, "周六的复诊号我也挂了，能帮我退掉吗？"],
            },
            "related_different": [HIST, "医院的停车场在哪？能停多久？"],
        },
    },
    # ------------------------------------------------------------------ legal / contract admin
    {
        "id": "contract-admin",
        "domain": "legal/contract admin",
        "en": {
            "history": [
                "We signed a 3-year lease on the Baker Street office in 2023.",
                "Noted. Early termination terms are usually in the break clause of the lease.",
            ],
            "base": [HIST, "How much notice do we need to give to end the office lease early?"],
            "paraphrase": [
                "If we want out of our Baker Street office lease before the 3 years are up, how far in advance do we have to tell the landlord?"
            ],
            "coreference": [
                "Can you pull up the Baker Street office lease? 3 years, signed in 2023.",
                "Got it — that's the lease with the break clause in section 9.",
                "how much notice do we need to end it early?",
            ],
            "added_background": [
                HIST,
                "Context: we're a 12-person startup and nobody here has a legal background, I'm the office manager. "
                "How much notice do we need to give to end the office lease early?",
            ],
            "entity_swap": [HIST, "How much notice do we need to give to end the warehouse lease early?"],
            "intent_reversal": {
                "cached": ["How do I add an auto-renewal clause to the supplier contract?"],
                "new": ["How do I remove the auto-renewal clause from the supplier contract?"],
            },
            "related_different": [HIST, "Who needs to sign the notice to end the office lease early?"],
        },
        "zh": {
            "history": [
                "我这边有份采购合同，总金额 4.8 万。",
                "收到，请问需要协助什么？",
            ],
            "base": [HIST, "这份还需要走法务审核吗？"],
            "paraphrase": ["4.8 万的采购合同，还用给法务看吗？"],
            "coreference": [
                "我这边有份采购合同，总金额 4.8 万，现在走到哪一步了？",
                "目前在部门负责人审批这一步。",
                "那它后面还需要走法务审核吗？",
            ],
            "added_background": [
                HIST,
                "供应商催得很紧，说月底前必须签，不然下个季度排不上产。这份还需要走法务审核吗？",
            ],
            "entity_swap": [
                "我这边有份采购合同，总金额 48 万。",
                "收到，请问需要协助什么？",
                "这份还需要走法务审核吗？",
            ],
            "intent_reversal": {
                "cached": ["合同系统里怎么给审批流程加一个财务节点？"],
                "new": ["合同系统里怎么把审批流程里的财务节点去掉？"],
            },
            "related_different": [HIST, "这份合同需要谁来盖章？"],
        },
    },
    # ------------------------------------------------------------------ e-commerce returns
    {
        "id": "returns",
        "domain": "e-commerce returns",
        "en": {
            "history": [
                "I bought a pair of running shoes from you 20 days ago.",
                "Thanks — I can see the order. How can I help?",
            ],
            "base": [HIST, "They're too small. Can I still return them?"],
            "paraphrase": [
                "Hi, the running shoes I ordered just under three weeks ago are too small — is it too late to send them back?"
            ],
            "coreference": {
                "cached": ["Can I return running shoes 20 days after buying them if they're too small?"],
                "new": [HIST, "they don't fit, way too tight. is returning them still possible?"],
            },
            "added_background": [
                HIST,
                "They're too small — apparently my feet grew half a size during pregnancy, who knew. Can I still return them?",
            ],
            "entity_swap": [
                "I bought a pair of running shoes from you 40 days ago.",
                "Thanks — I can see the order. How can I help?",
                "They're too small. Can I still return them?",
            ],
            "intent_reversal": {
                "cached": [HIST, "They're too small. How do I start a return?"],
                "new": [HIST, "I started a return for them yesterday but my brother wants them now — how do I cancel the return?"],
            },
            "related_different": [HIST, "They're too small. Can I exchange them for a bigger size instead?"],
        },
        "zh": {
            "base": ["七天无理由退货的运费谁出？"],
            "paraphrase": ["不想要了走 7 天无理由退回去，寄回的邮费是我自己付还是商家付？"],
            "coreference": {
                "cached": [
                    "买了件外套，穿上不太喜欢，收到还没满七天。",
                    "可以走七天无理由退货，吊牌别剪就行。",
                    "那这种退货运费谁承担？",
                ],
                "new": [
                    "我买的那件外套不太喜欢，现在还在七天内。",
                    "可以申请七天无理由退货哦，记得吊牌不要剪。",
                    "那这种退货运费谁承担？",
                ],
            },
            "added_background": ["哈哈我家猫特别喜欢快递盒，每次拆完都要钻进去玩半天。言归正传，七天无理由退货的运费谁出？"],
            "entity_swap": ["质量问题退货的运费谁出？"],
            "intent_reversal": {
                "cached": ["订单能不能开启运费险？"],
                "new": ["订单能不能取消运费险？"],
            },
            "related_different": [
                "我买的那件外套不太喜欢，现在还在七天内。",
                "可以申请七天无理由退货哦，记得吊牌不要剪。",
                "退货以后钱多久能退回来？",
            ],
        },
    },
    # ------------------------------------------------------------------ subscriptions
    {
        "id": "subscriptions",
        "domain": "subscriptions",
        "en": {
            "history": [
                "I pay for my subscription on your website with a card.",
                "Thanks — web subscriptions are billed by card and you can manage them under Account > Billing.",
            ],
            "base": [HIST, "If I switch from the monthly to the annual plan, do I lose the days left on my current month?"],
            "paraphrase": [
                "I pay on the website by card. Going from monthly billing to yearly — what happens to the time I've already paid for this month?"
            ],
            "coreference": [
                "What plans do you have? I'd pay on the website.",
                "There's Plus monthly at $12 and Plus annual at $120, both payable by card on the site.",
                "if I'm on the first and move to the second mid-month, do I lose the days I have left?",
            ],
            "added_background": [
                HIST,
                "I've been on the fence for ages but I use it every day now, so committing makes sense. "
                "If I switch from the monthly to the annual plan, do I lose the days left on my current month?",
            ],
            "entity_swap": [
                "I pay for my subscription through the App Store on my iPhone.",
                "Thanks — App Store subscriptions are billed by Apple and managed in your Apple ID settings.",
                "If I switch from the monthly to the annual plan, do I lose the days left on my current month?",
            ],
            "intent_reversal": [HIST, "If I switch from the annual back to the monthly plan, do I lose the months left on my current year?"],
            "related_different": [HIST, "If I switch from the monthly to the annual plan, when exactly will I be charged?"],
        },
        "zh": {
            "base": ["视频会员的自动续费怎么关？"],
            "paraphrase": ["不想每个月自动扣钱了，会员的连续包月在哪里取消？"],
            "coreference": [
                "我开了你们的连续包月会员。",
                "感谢支持！连续包月会在每个周期自动扣费，可以随时在设置里管理。",
                "它在哪关？不想续了",
            ],
            "added_background": [
                "最近在准备考研，基本没时间追剧了，等考完再说吧。",
                "理解理解，祝考研顺利！有什么需要帮忙的吗？",
                "视频会员的自动续费怎么关？",
            ],
            "entity_swap": ["音乐会员的自动续费怎么关？"],
            "intent_reversal": ["视频会员的自动续费之前关掉了，怎么重新打开？"],
            "related_different": [
                "我开了你们的连续包月会员。",
                "感谢支持！连续包月会在每个周期自动扣费，可以随时在设置里管理。",
                "关掉自动续费以后，这个月已经付的钱能退吗？",
            ],
        },
    },
    # ------------------------------------------------------------------ networking / VPN
    {
        "id": "vpn",
        "domain": "networking/VPN",
        "en": {
            "base": ["How do I set up the company VPN on my Mac?"],
            "paraphrase": ["What are the steps to get the corporate VPN working on a MacBook?"],
            "coreference": {
                "cached": [
                    "I got the company VPN profile from IT by email.",
                    "Good — the .ovpn profile contains the server address and certificates.",
                    "how do I use it on my Mac?",
                ],
                "new": [
                    "IT just emailed me the config file for the company VPN.",
                    "Great — that .ovpn file has everything the client needs.",
                    "how do I use it on my Mac?",
                ],
            },
            "added_background": [
                "Hi, I'm starting remote work next week — we're relocating to another city, so much admin!",
                "Exciting! Let me know what you need to get set up.",
                "How do I set up the company VPN on my Mac?",
            ],
            "entity_swap": ["How do I set up the company VPN on my Ubuntu laptop?"],
            "intent_reversal": {
                "cached": ["How do I make the VPN connect automatically when my Mac starts up?"],
                "new": ["How do I stop the VPN from connecting automatically when my Mac starts up?"],
            },
            "related_different": [
                "IT just emailed me the config file for the company VPN.",
                "Great — that .ovpn file has everything the client needs.",
                "how do I check whether it routes only internal traffic or everything?",
            ],
        },
        "zh": {
            "history": [
                "Windows 电脑连上公司 VPN 以后，访问外网特别慢。",
                "这通常是因为所有流量都走了 VPN 隧道。",
            ],
            "base": [HIST, "怎么设置成只有内网地址走 VPN？"],
            "paraphrase": ["Windows 上开着公司 VPN 的时候，想让公网流量直接出去，只有内网网段走隧道，这个怎么配？"],
            "coreference": [
                "我用的是 Windows 笔记本，听说 VPN 有个分流的功能？",
                "对，就是 split tunneling，可以让一部分流量走 VPN，其他的直连。",
                "那这个怎么设置？只要内网走 VPN 就行",
            ],
            "added_background": [HIST, "主要是开视频会议老卡，领导讲话断断续续的，挺尴尬。怎么设置成只有内网地址走 VPN？"],
            "entity_swap": [
                "Mac 连上公司 VPN 以后，访问外网特别慢。",
                "这通常是因为所有流量都走了 VPN 隧道。",
                "怎么设置成只有内网地址走 VPN？",
            ],
            "intent_reversal": {
                "cached": ["公司 VPN 怎么设置成只有内网地址走隧道？"],
                "new": ["公司 VPN 怎么设置成所有流量都走隧道，禁止直连？"],
            },
            "related_different": [HIST, "怎么查看 VPN 现在给我分配的内网 IP？"],
        },
    },
    # ------------------------------------------------------------------ data privacy / GDPR
    {
        "id": "privacy-requests",
        "domain": "data privacy/GDPR requests",
        "en": {
            "base": ["How do I request a copy of all the personal data you hold about me?"],
            "paraphrase": ["I'd like to exercise my right of access. What's the process for getting an export of my personal information from you?"],
            "coreference": [
                "Do you store my order history and browsing data?",
                "Yes, we keep order history and some browsing data linked to your account for up to 24 months.",
                "how can I get a copy of that, plus anything else you have on me?",
            ],
            "added_background": [
                "I've been reading about GDPR for a uni assignment and got curious.",
                "Nice topic! Let me know if you have questions about how we handle data.",
                "actually yes — how do I request a copy of all the personal data you hold about me?",
            ],
            "entity_swap": ["How do I request a copy of all the personal data you hold about my late father?"],
            "intent_reversal": {
                "cached": ["How do I opt in to personalised recommendations based on my data?"],
                "new": ["How do I opt out of personalised recommendations based on my data?"],
            },
            "related_different": [
                "Do you store my order history and browsing data?",
                "Yes, we keep order history and some browsing data linked to your account for up to 24 months.",
                "do you share any of it with third parties?",
            ],
        },
        "zh": {
            "base": ["怎么注销账号并删除我的所有个人信息？"],
            "paraphrase": ["我不打算再用了，想把账号销掉，顺便让你们把我的个人数据都清掉，要怎么操作？"],
            "coreference": [
                "你们会保存我的手机号和收货地址吗？",
                "会的，这些信息用于下单和配送，保存在您的账号里。",
                "我想把这些连同账号一起删掉，怎么弄？",
            ],
            "added_background": [
                "最近老接到骚扰电话，也说不清是哪里泄露的，干脆把不用的 App 都清理一遍。",
                "理解您的顾虑，账号和数据相关的问题我们都可以协助处理。",
                "怎么注销账号并删除我的所有个人信息？",
            ],
            "entity_swap": ["怎么注销我孩子的账号并删除他的所有个人信息？"],
            "intent_reversal": {
                "cached": ["怎么授权 App 使用我的位置信息？"],
                "new": ["怎么撤回 App 使用我位置信息的授权？"],
            },
            "related_different": [
                "你们会保存我的手机号和收货地址吗？",
                "会的，这些信息用于下单和配送，保存在您的账号里。",
                "注销账号以后，这些信息你们还会保留多久？",
            ],
        },
    },
    # ------------------------------------------------------------------ spreadsheets
    {
        "id": "spreadsheets",
        "domain": "spreadsheets",
        "en": {
            "base": ["In Excel, how do I highlight duplicate values in column B?"],
            "paraphrase": ["excel: quickest way to make repeated entries in col B stand out with a colour?"],
            "coreference": [
                "I've got a list of customer emails in column B in Excel, about 3,000 rows.",
                "OK — that's easy to work with using conditional formatting or formulas.",
                "how do I highlight the ones that show up more than once?",
            ],
            "added_background": [
                "Our intern left a mess in the mailing list and I have a client call in 20 min, send help 😅 "
                "In Excel, how do I highlight duplicate values in column B?"
            ],
            "entity_swap": ["In Google Sheets, how do I highlight duplicate values in column B?"],
            "intent_reversal": ["In Excel, how do I highlight only the unique values in column B?"],
            "related_different": [
                "I've got a list of customer emails in column B in Excel, about 3,000 rows.",
                "OK — that's easy to work with using conditional formatting or formulas.",
                "how do I delete the duplicates and keep just one of each?",
            ],
        },
        "zh": {
            "base": ["WPS 表格里怎么把两列内容合并成一列，中间加个横杠？"],
            "paraphrase": ["用 WPS 做表，想把 A 列和 B 列拼到一个单元格里，用“-”隔开，公式怎么写？"],
            "coreference": [
                "我表里 A 列是省份，B 列是城市。",
                "好的，需要对这两列做什么处理呢？",
                "把它们合到一列，中间加个横杠，WPS 里怎么弄？",
            ],
            "added_background": [
                "领导临时要一份名单，半小时后就要，我表格用得真的很菜……WPS 表格里怎么把两列内容合并成一列，中间加个横杠？"
            ],
            "entity_swap": ["WPS 表格里怎么把三列内容合并成一列，中间加个横杠？"],
            "intent_reversal": ["WPS 表格里怎么把一列内容按横杠拆成两列？"],
            "related_different": [
                "我表里 A 列是省份，B 列是城市。",
                "好的，需要对这两列做什么处理呢？",
                "合并完以后怎么把公式结果转成纯文本？",
            ],
        },
    },
    # ------------------------------------------------------------------ Python coding
    {
        "id": "python-coding",
        "domain": "Python coding",
        "en": {
            "base": ["How do I read a CSV file into a list of dicts in Python?"],
            "paraphrase": ["python: I want every row of a csv as a dictionary keyed by the header names. what's the standard way to do that?"],
            "coreference": [
                "I have a file called users.csv with columns id, name and email.",
                "Nice and simple — Python's csv module handles that well.",
                "how do I load it so each row is a dict?",
            ],
            "added_background": [
                "I'm a data analyst trying to move off Excel macros, so I'm pretty new to Python, be gentle lol. "
                "How would I turn a CSV file into a list of dictionaries?"
            ],
            "entity_swap": ["How do I read a JSON Lines file into a list of dicts in Python?"],
            "intent_reversal": ["How do I write a list of dicts out to a CSV file in Python?"],
            "related_different": [
                "I have a file called users.csv with columns id, name and email.",
                "Nice and simple — Python's csv module handles that well.",
                "how do I skip the header row when I read it?",
            ],
        },
        "zh": {
            "history": [
                "我在用 requests 调一个第三方接口。",
                "好的，requests 用起来很方便，遇到什么问题了？",
            ],
            "base": [HIST, "怎么给请求设置超时时间？"],
            "paraphrase": ["requests.get 有时候会一直卡着不返回，怎么让它超过几秒就自动放弃？"],
            "coreference": [
                "Python 里发 HTTP 请求一般用哪个库？",
                "最常用的是 requests，简单好上手。",
                "那用它怎么设置超时？",
            ],
            "added_background": [
                HIST,
                "背景是我们有个定时任务半夜卡死了，早上才发现，被老板念了一顿😅 怎么给请求设置超时时间？",
            ],
            "entity_swap": [
                "我在用 aiohttp 调一个第三方接口。",
                "好的，aiohttp 是异步的 HTTP 客户端，遇到什么问题了？",
                "怎么给请求设置超时时间？",
            ],
            "intent_reversal": {
                "cached": [HIST, "怎么让请求自动跟随重定向？"],
                "new": [HIST, "怎么禁止请求自动跟随重定向？"],
            },
            "related_different": [HIST, "请求失败了怎么自动重试几次？"],
        },
    },
    # ------------------------------------------------------------------ JavaScript coding
    {
        "id": "js-coding",
        "domain": "JavaScript coding",
        "en": {
            "base": ["How do I remove duplicates from an array in JavaScript?"],
            "paraphrase": [
                "I'm refactoring some old jQuery code.",
                "Sounds good — modern JS covers most of what jQuery was used for.",
                "given an array with repeated values, what's the cleanest way to end up with only the distinct ones?",
            ],
            "coreference": [
                "I have an array of tag strings in JS: ['a', 'b', 'a', 'c'].",
                "OK, what would you like to do with it?",
                "how do I get rid of the repeats in it?",
            ],
            "added_background": [
                "Doing a take-home exercise for a job interview tonight and I'm super nervous. "
                "Anyway — how do I remove duplicates from an array in JavaScript?"
            ],
            "entity_swap": ["How do I remove duplicates from an array of objects by their id in JavaScript?"],
            "intent_reversal": ["How do I keep only the duplicates from an array in JavaScript?"],
            "related_different": [
                "I have an array of tag strings in JS: ['a', 'b', 'a', 'c'].",
                "OK, what would you like to do with it?",
                "how do I count how many times each tag appears?",
            ],
        },
        "zh": {
            "base": ["JS 里怎么把时间戳转成 YYYY-MM-DD 格式的日期？"],
            "paraphrase": ["前端拿到一个毫秒时间戳，想显示成 2024-05-01 这种年月日，用原生 JS 怎么写？"],
            "coreference": [
                "后端接口返回的 createdAt 是个时间戳，比如 1714521600000。",
                "这是毫秒级时间戳，前端可以直接传给 new Date() 处理。",
                "那它怎么格式化成 YYYY-MM-DD？",
            ],
            "added_background": [
                "我是从 Java 转前端的，刚接手一个 Vue 项目，很多写法还不熟。请教下时间戳怎么用 JS 格式化成 YYYY-MM-DD？"
            ],
            "entity_swap": ["JS 里怎么把时间戳转成 HH:mm:ss 格式的时间？"],
            "intent_reversal": ["JS 里怎么把 YYYY-MM-DD 格式的日期转成时间戳？"],
            "related_different": [
                "后端接口返回的 createdAt 是个时间戳，比如 1714521600000。",
                "这是毫秒级时间戳，前端可以直接传给 new Date() 处理。",
                "怎么算它离现在过去了几天？",
            ],
        },
    },
    # ------------------------------------------------------------------ git
    {
        "id": "git",
        "domain": "git",
        "en": {
            "history": [
                "I committed to main by accident, haven't pushed yet.",
                "No problem — since it's not pushed, it's easy to fix locally.",
            ],
            "base": [HIST, "How do I move that commit to a new branch instead?"],
            "paraphrase": [
                "I made a commit on main that should've gone on a feature branch (still local, not pushed). "
                "How do I shift it over to a new branch and leave main clean?"
            ],
            "coreference": {
                "cached": ["How do I move my last unpushed commit from main to a new branch?"],
                "new": [
                    "oops, just committed my feature work straight onto main",
                    "Happens to everyone! Has it been pushed yet?",
                    "nope, still local. can I put it on its own branch instead?",
                ],
            },
            "added_background": [
                HIST,
                "It's my first week and I really don't want to mess up the shared repo. How do I move that commit to a new branch instead?",
            ],
            "entity_swap": [
                "I made 3 commits to main by accident, haven't pushed yet.",
                "No problem — since they're not pushed, it's easy to fix locally.",
                "How do I move those commits to a new branch instead?",
            ],
            "intent_reversal": {
                "cached": ["how do I stage just one file in git?"],
                "new": ["how do I unstage just one file in git?"],
            },
            "related_different": [HIST, "How do I change the message of that commit?"],
        },
        "zh": {
            "base": ["git 怎么撤销最近一次 commit，但是保留代码改动？"],
            "paraphrase": [
                "我在整理本地的提交记录，还没推到远程。",
                "好的，本地的提交怎么改都比较安全，需要什么帮助？",
                "上一次提交不想要了，但改过的代码得留着，git 里怎么回退？",
            ],
            "coreference": [
                "我刚 commit 了一次，结果发现有个调试用的改动不该提交。",
                "如果还没 push，处理起来很简单。",
                "嗯还没 push。想把它撤回来但代码别丢，怎么弄？",
            ],
            "added_background": [
                "说出来有点丢人，用 git 两年了还是经常搞混这几个命令🤦 git 怎么撤销最近一次 commit，但是保留代码改动？"
            ],
            "entity_swap": ["git 怎么撤销倒数第三次 commit，但是保留代码改动？"],
            "intent_reversal": ["git 怎么撤销最近一次 commit，改动也别留了，直接丢掉？"],
            "related_different": ["git 怎么修改最近一次 commit 的提交信息？"],
        },
    },
    # ------------------------------------------------------------------ email setup
    {
        "id": "email-setup",
        "domain": "email setup",
        "en": {
            "base": ["What IMAP and SMTP settings do I use to add my work email to Outlook?"],
            "paraphrase": ["Setting up my work mailbox in Outlook manually — which incoming and outgoing server details should I enter?"],
            "coreference": [
                "I'm trying to add my work email account to Outlook on my home PC.",
                "Sure. Auto-discovery sometimes fails, in which case you'll need to enter the server settings by hand.",
                "yep it failed. which settings do I need then?",
            ],
            "added_background": [
                "My laptop died over the weekend (RIP) so I'm setting everything up again on a borrowed one. "
                "What IMAP and SMTP settings do I use to add my work email to Outlook?"
            ],
            "entity_swap": ["What IMAP and SMTP settings do I use to add my personal Gmail to Outlook?"],
            "intent_reversal": {
                "cached": ["How do I set up an automatic out-of-office reply in Outlook?"],
                "new": ["How do I turn off the automatic out-of-office reply in Outlook? I'm back."],
            },
            "related_different": [
                "I'm trying to add my work email account to Outlook on my home PC.",
                "Sure. Auto-discovery sometimes fails, in which case you'll need to enter the server settings by hand.",
                "done, but Outlook keeps asking for my password every few minutes. why?",
            ],
        },
        "zh": {
            "base": ["iPhone 自带的邮件 App 怎么添加公司的腾讯企业邮箱？"],
            "paraphrase": ["想在苹果手机的原生邮件里登录我们公司的腾讯企业邮，该怎么配置？"],
            "coreference": [
                "我们公司用的是腾讯企业邮箱。",
                "好的，腾讯企业邮箱支持 IMAP/SMTP，也可以在企业微信里查看。",
                "iPhone 自带的邮件 App 能加它吗？怎么加？",
            ],
            "added_background": [
                "刚换了新手机，旧手机的东西都还没迁过来，一堆东西要重新弄，头大。",
                "换机确实挺折腾的，需要我帮您设置什么？",
                "iPhone 自带的邮件 App 怎么添加公司的腾讯企业邮箱？",
            ],
            "entity_swap": ["iPhone 自带的邮件 App 怎么添加公司的阿里企业邮箱？"],
            "intent_reversal": [
                "我们公司用的是腾讯企业邮箱。",
                "好的，腾讯企业邮箱支持 IMAP/SMTP，也可以在企业微信里查看。",
                "我下周离职了，iPhone 自带的邮件 App 里怎么把它删掉？",
            ],
            "related_different": ["iPhone 自带的邮件 App 收不到腾讯企业邮箱的新邮件提醒，怎么办？"],
        },
    },
    # ------------------------------------------------------------------ printer / IT helpdesk
    {
        "id": "it-helpdesk",
        "domain": "printer/IT helpdesk",
        "en": {
            "base": ["How do I add the 3rd floor printer on my Windows laptop?"],
            "paraphrase": ["Need to print to the printer up on the third floor from my Windows machine — how do I get it installed?"],
            "coreference": [
                "There's a new HP printer by the kitchen on the 3rd floor, right?",
                "Yes, it was installed last week and is on the office network.",
                "how do I get it on my Windows laptop?",
            ],
            "added_background": [
                "Hey helpdesk 👋 our team moved desks today, new neighbours, new coffee machine, all good.",
                "Glad the move went smoothly! What can I do for you?",
                "How do I add the 3rd floor printer on my Windows laptop?",
            ],
            "entity_swap": ["How do I add the 5th floor printer on my Windows laptop?"],
            "intent_reversal": [
                "There's a new HP printer by the kitchen on the 3rd floor, right?",
                "Yes, it was installed last week and is on the office network.",
                "I don't use it since we moved floors — how do I remove it from my Windows laptop?",
            ],
            "related_different": ["How do I scan to email on the 3rd floor printer?"],
        },
        "zh": {
            "history": [
                "公司电脑开机一直提示“此 Windows 副本不是正版”。",
                "这是激活状态出了问题，公司电脑一般是通过 KMS 自动激活的。",
            ],
            "base": [HIST, "怎么重新激活？"],
            "paraphrase": ["公司配的电脑突然说 Windows 不是正版，要怎么重新激活一下？"],
            "coreference": [
                "公司电脑的 Windows 是怎么激活的？",
                "通过 KMS，连上公司内网时会自动向 KMS 服务器激活。",
                "我这台现在显示未激活了，要怎么重新弄一下？",
            ],
            "added_background": [HIST, "下午还要给客户做演示，屏幕右下角一直挂着水印很不专业。怎么重新激活？"],
            "entity_swap": [
                "公司电脑打开 Word 一直提示“此 Office 副本不是正版”。",
                "这是激活状态出了问题，公司电脑一般是通过 KMS 自动激活的。",
                "怎么重新激活？",
            ],
            "intent_reversal": {
                "cached": ["公司电脑怎么开启远程桌面？"],
                "new": ["公司电脑怎么关闭远程桌面？"],
            },
            "related_different": [HIST, "怎么查看现在的激活还有多久到期？"],
        },
    },
    # ------------------------------------------------------------------ restaurant reservations
    {
        "id": "restaurant",
        "domain": "restaurant reservations",
        "en": {
            "base": ["Can I book a table for 4 this Saturday at 7pm?"],
            "paraphrase": ["Do you have room for four people on Saturday evening around 7?"],
            "coreference": [
                "Are you open this Saturday evening?",
                "Yes, we're open from 5pm to 11pm on Saturday.",
                "great, can I get a table for 4 at 7 then?",
            ],
            "added_background": [
                "It's my parents' 30th anniversary and they've loved this place since their first date here ❤️ "
                "Any chance of a table for four this Saturday at 7?"
            ],
            "entity_swap": [
                "Are you open this Saturday evening?",
                "Yes, we're open from 5pm to 11pm on Saturday.",
                "Can I book a table for 9 this Saturday at 7pm?",
            ],
            "intent_reversal": {
                "cached": ["Can you add a birthday cake to my Saturday booking?"],
                "new": ["Can you take the birthday cake off my Saturday booking? We don't need it anymore."],
            },
            "related_different": ["Can I bring my own wine if I book a table for 4 this Saturday at 7pm?"],
        },
        "zh": {
            "base": ["周六晚上 6 点还有 4 人位吗？"],
            "paraphrase": ["这周六傍晚六点，四个人，还能订到位子吗？"],
            "coreference": [
                "你们周六晚上营业到几点？",
                "周六营业到晚上 10 点，最后点单 9 点半。",
                "那 6 点的 4 人位还有吗？",
            ],
            "added_background": [
                "我们几个大学室友毕业十年第一次聚，好不容易凑齐了时间～",
                "太难得了！欢迎来我们这儿聚餐。",
                "周六晚上 6 点还有 4 人位吗？",
            ],
            "entity_swap": ["周日晚上 6 点还有 4 人位吗？"],
            "intent_reversal": {
                "cached": [
                    "我订了周六晚上 6 点的位子，4 个人。",
                    "好的，已为您预留了靠窗的 4 人桌。",
                    "能帮我加一个儿童座椅吗？",
                ],
                "new": [
                    "我订了周六晚上 6 点的位子，4 个人。",
                    "好的，已为您预留了靠窗的 4 人桌。",
                    "之前说要的儿童座椅不用了，帮我取消掉吧？",
                ],
            },
            "related_different": [
                "你们周六晚上营业到几点？",
                "周六营业到晚上 10 点，最后点单 9 点半。",
                "6 点的 4 人位要交定金吗？",
            ],
        },
    },
    # ------------------------------------------------------------------ containers / backups
    {
        "id": "containers-backups",
        "domain": "devops (Docker restart policy / cloud server snapshots)",
        "en": {
            "history": [
                "Our app runs in Docker Compose on a single VM.",
                "OK — so services, volumes and networks are all defined in docker-compose.yml.",
            ],
            "base": [HIST, "How do I make the postgres container restart automatically if it crashes?"],
            "paraphrase": [
                "docker compose setup: if the postgres service dies I want Docker to bring it back up by itself. what do I add to the yml?"
            ],
            "coreference": [
                "In our docker-compose.yml there's a postgres service and a redis one.",
                "Got it. What would you like to change?",
                "can the first one come back up on its own if it crashes? how?",
            ],
            "added_background": [
                HIST,
                "We had a 2am page last night because it died and nobody noticed for an hour. "
                "How do I make the postgres container restart automatically if it crashes?",
            ],
            "entity_swap": [
                "Our app runs in Docker Swarm across three nodes.",
                "OK — so services are defined in a stack file and deployed with docker stack deploy.",
                "How do I make the postgres container restart automatically if it crashes?",
            ],
            "intent_reversal": [
                HIST,
                "I don't want the postgres container restarting by itself when it crashes — how do I turn that behaviour off?",
            ],
            "related_different": [HIST, "How do I make sure the postgres data survives if I remove the container?"],
        },
        "zh": {
            "base": ["云服务器怎么设置每天凌晨自动创建快照？"],
            "paraphrase": ["想让 ECS 每天半夜自己打一个快照，这个自动策略在哪设置？"],
            "coreference": [
                "我们的数据库装在一台云服务器上，现在还没做任何备份。",
                "这样风险比较大，建议至少给云盘开启自动快照。",
                "那它怎么设成每天凌晨自动打？",
            ],
            "added_background": [
                "上周隔壁团队误删了数据，恢复了一整天，我们组长吓坏了，让我赶紧把备份搞起来。云服务器怎么设置每天凌晨自动创建快照？"
            ],
            "entity_swap": ["云服务器怎么设置每周日凌晨自动创建快照？"],
            "intent_reversal": ["云服务器每天凌晨的自动快照怎么取消？"],
            "related_different": [
                "我们的数据库装在一台云服务器上，现在还没做任何备份。",
                "这样风险比较大，建议至少给云盘开启自动快照。",
                "快照打好以后，怎么用它把数据回滚到某一天？",
            ],
        },
    },
]


# --------------------------------------------------------------------------
# building the cases
# --------------------------------------------------------------------------


def expand(turns: list[str], history: list[str] | None, where: str) -> list[str]:
    """Replace the HIST marker by the history turns."""
    out: list[str] = []
    for t in turns:
        if t == HIST:
            if not history:
                raise ValueError(f"{where}: HIST used but no history given")
            out.extend(history)
        else:
            out.append(t)
    return out


def to_messages(turns: list[str], where: str) -> list[dict]:
    if not turns or len(turns) % 2 == 0:
        raise ValueError(f"{where}: a conversation alternates user/assistant and ends with a user message")
    msgs = []
    for i, text in enumerate(turns):
        if not text.strip() or len(text) > MAX_CHARS:
            raise ValueError(f"{where}: message {i} is empty or longer than {MAX_CHARS} chars")
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return msgs


def build_cases() -> list[dict]:
    cases = []
    seen: set[str] = set()
    for sc in SCENARIOS:
        for lang in LANGS:
            block = sc[lang]
            history = block.get("history")
            for category, should_hit in CATEGORIES.items():
                cid = f"{sc['id']}/{lang}/{category}"
                entry = block[category]
                if isinstance(entry, dict):
                    new, cached = entry["new"], entry.get("cached", block["base"])
                else:
                    new, cached = entry, block["base"]
                context = to_messages(expand(new, history, cid), cid)
                cached_context = to_messages(expand(cached, history, cid), cid)
                if context == cached_context:
                    raise ValueError(f"{cid}: context and cached_context are identical")
                if category == "coreference" and len(context) < 3:
                    raise ValueError(f"{cid}: a coreference case needs an earlier exchange in context")
                if cid in seen:
                    raise ValueError(f"duplicate id {cid}")
                seen.add(cid)
                cases.append({
                    "context": context,
                    "cached_context": cached_context,
                    "category": category,
                    "should_hit": should_hit,
                    "lang": lang,
                    "id": cid,
                })
    return cases


def main() -> None:
    cases = build_cases()
    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    OUT_PATH.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {len(cases)} cases to {OUT_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
