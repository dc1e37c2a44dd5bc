"""elicitor's own words in the person's language: the catalogs, choosing the language, numbers and dates, and each
renderer in Chinese and Arabic (the server's words shown as sent, their direction isolated)."""

from __future__ import annotations

import json
import os
import re
import string
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from babel.messages.pofile import read_po
from prompt_toolkit.data_structures import Size

from elicitor import (
    Accepted,
    Cancelled,
    Client,
    Context,
    Declined,
    FieldError,
    Form,
    InvalidAnswer,
    JSONRPCError,
    Server,
    TerminalHandler,
)
from elicitor.client import BrowserHandler, ElicitationRequest, UrlElicitationRequest
from elicitor.client._present import FSI, PDI, hint, show
from elicitor.forms import EnumField, NumberField, StringField
from elicitor.i18n import ENGLISH, N_, from_environment, language, negotiate
from elicitor.types import Implementation

from .conftest import connected, scripted_terminal, serving, unisolated
from .test_screen import ENTER, TAB, Tmux, answer, screen_handler, tmux  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import catalogs  # noqa: E402

LOCALES = ROOT / "src" / "elicitor" / "i18n" / "locales"


def ids(messages: Any) -> set[str]:
    out: set[str] = set()
    for m in messages:
        if m.id:
            out.update(m.id if isinstance(m.id, tuple) else (m.id,))
    return out


# ---- the catalogs ------------------------------------------------------------------------------------------------


def test_every_sentence_the_source_marks_is_in_the_catalogs_and_nothing_else() -> None:
    """The extraction diff: what Babel extracts now is what the template holds, and every marked sentence the
    syntax trees show (f-strings too, which Babel's tokenizer skips on 3.11) is in it. Fix: make catalogs."""
    with catalogs.TEMPLATE.open("rb") as file:
        template = ids(read_po(file))
    extracted = ids(catalogs.extract())
    assert extracted - template == set(), "marked in the source, missing from the catalogs: run make catalogs"
    assert template - extracted == set(), "in the catalogs, no longer in the source: run make catalogs"
    marked = catalogs.marked()
    assert {text: where for text, where in marked.items() if text not in template} == {}


SAYING = {"write", "_write", "say", "print", "result", "error"}
"""What puts a line in front of the person in the command's own modules (the terminal, stderr, a usage error)."""
SAYS_ITSELF = (
    "src/elicitor/_connect.py",
    "src/elicitor/demo.py",
    "src/elicitor/cli.py",
    "src/elicitor/proxy/_run.py",
    "src/elicitor/client/auth/_loopback.py",  # the sign-in's lines on the terminal
)
NOT_WORDS = re.compile(
    r"^elicitor (connect|serve|proxy)(: --ui terminal)?: |^elicitor (connect|serve|proxy)?$|^--lang: $|\[server\]"
)
"""Not sentences: the program's name before what it says (and before its version), an option's, a tag."""


def english_said(path: Path) -> list[str]:
    """The English words a module hands to something that shows them (``write``, ``print``...) without the
    catalogs: literal text in the line itself, outside every call (``t(...)`` marks a sentence for them)."""
    import ast

    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            return  # marked (the catalogs have it), or computed: what a call returns is no literal of this line
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.search(r"[A-Za-z]{2,}", NOT_WORDS.sub("", node.value))
        ):
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in SAYING:
                for arg in node.args:
                    visit(arg)
    return found


@pytest.mark.parametrize("module", SAYS_ITSELF)
def test_the_commands_say_nothing_to_a_person_outside_the_catalogs(module: str) -> None:
    """connect, the demo's client, the command line and the proxy: every line of their own goes through the
    catalogs (what a server says, its tools' names and results, is passed on as sent)."""
    assert english_said(ROOT / module) == []


@pytest.mark.parametrize("folder", ["zh_Hans", "zh_Hant", "ar"])
def test_each_translated_catalog_is_complete_with_the_same_placeholders(folder: str) -> None:
    with catalogs.TEMPLATE.open("rb") as file:
        template = ids(read_po(file))
    with (LOCALES / folder / "LC_MESSAGES" / "elicitor.po").open("rb") as file:
        catalog = read_po(file, locale=folder)
    assert ids(catalog) == template
    names = lambda text: {f for _, f, _, _ in string.Formatter().parse(text) if f}  # noqa: E731
    for m in catalog:
        if not m.id:
            continue
        strings = m.string if isinstance(m.string, tuple) else (m.string,)
        assert all(strings), f"{folder}: {m.id!r} is not translated"
        wanted = names(m.id[1] if isinstance(m.id, tuple) else m.id)
        for text in strings:
            assert names(text) <= wanted | {"n"}, f"{folder}: {text!r} names a value {m.id!r} does not have"
            assert wanted - {"n"} <= names(text), f"{folder}: {text!r} leaves out a value of {m.id!r}"


def test_the_compiled_catalogs_answer() -> None:
    assert language("zh").text(N_("Cancel")) == "取消" and language("ar")._("Cancel") == "إلغاء"
    assert ENGLISH._("Cancel") == "Cancel"


def catalog_of(folder: str) -> dict[str, tuple[str, ...]]:
    with (LOCALES / folder / "LC_MESSAGES" / "elicitor.po").open("rb") as file:
        found = read_po(file, locale=folder)
    out: dict[str, tuple[str, ...]] = {}
    for m in found:
        if m.id:
            msgid, texts = m.id[0] if isinstance(m.id, tuple) else m.id, m.string
            out[str(msgid)] = tuple(texts) if isinstance(texts, tuple | list) else (str(texts),)
    return out


SIMPLIFIED_ONLY = set(
    "与个为义亲仅从会关内删别务动区协单历参发变号后吗启命国复实对将尔属带并应开录径态户择数无时显机权"
    "来标检歧没浏录状独现电盖码确种称符签终结给绝继续编网脚获见览认议许访识试话询该语误请调谢败转载较输达过"
    "运还这进连退选邮钮链错键长闭问间际页项须题骤默"
)
"""Characters Simplified Chinese writes where Traditional writes another (这 for 這): each is in the Simplified
catalog, none may be in the Traditional one. (信, 息 and 象 are written alike in both: Taiwan's 訊息, 相信, 對象;
so are 己 and 待: 自己, 招待.)"""


def test_the_traditional_catalog_is_written_in_traditional_characters_with_taiwan_words() -> None:
    """zh-Hant is Traditional Chinese as Taiwan writes it, not the Simplified catalog's characters converted one by
    one: 伺服器 (server), 登入 (sign in), 連結 (link), 網址 (URL), 分頁 (tab), 欄位 (field), 通訊埠 (port)."""
    hans, hant = catalog_of("zh_Hans"), catalog_of("zh_Hant")
    assert {c for texts in hans.values() for text in texts for c in text} >= SIMPLIFIED_ONLY
    strays = {msgid: c for msgid, texts in hant.items() for text in texts for c in text if c in SIMPLIFIED_ONLY}
    assert strays == {}
    zh_tw = language("zh-TW")
    assert zh_tw.tag == "zh-Hant" and zh_tw._("the server") == "伺服器" and zh_tw._("Cancel") == "取消"
    assert zh_tw._("Decline") == "拒絕" and zh_tw._("Open that link in a browser.") == "請在瀏覽器中開啟該連結。"
    assert zh_tw._("Sign in to continue, at {host}:", host="idp.example") == "請登入以繼續，登入位置在 idp.example："
    assert (
        zh_tw._("You can close this tab.") == "您可以關閉此分頁。"
        and zh_tw._("this field is required") == "此欄位為必填"
    )
    assert zh_tw._("it uses an unusual port ({port})", port="8443") == "使用了不常見的通訊埠（8443）"
    assert zh_tw._("URL:") == "網址：" and "程式" in zh_tw._(
        "no program {name}: check the command (or give the server's http(s) URL).", name="x"
    )


# ---- which language --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "tag"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh-Hans"),
        ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "ar_EG.UTF-8"}, "ar"),
        ({"LC_ALL": "zh_SG.UTF-8", "LC_MESSAGES": "ar_EG.UTF-8", "LANG": "en_GB"}, "zh-Hans"),
        ({"LANG": "de_DE.UTF-8", "LANGUAGE": "fr:ar:en"}, "ar"),
        ({"LANG": "C", "LANGUAGE": "zh"}, "en"),  # gettext: LANGUAGE does not apply to the C locale
        ({"LANG": "zh_TW.UTF-8"}, "zh-Hant"),  # Traditional Chinese is not Simplified
        ({"LANG": "zh_HK.UTF-8"}, "zh-Hant"),
        ({"LC_ALL": "zh_MO.UTF-8"}, "zh-Hant"),
        ({"LANG": "zh_CN.UTF-8", "LC_MESSAGES": "zh_Hant_HK.UTF-8"}, "zh-Hant"),
        ({"LANG": "en_US.UTF-8", "LANGUAGE": "zh_TW:zh"}, "zh-Hant"),  # bare zh only after zh_TW
        ({"LANG": "en_US.UTF-8", "LANGUAGE": "fr:zh_HK"}, "zh-Hant"),
        ({"LANG": "zh_TW.UTF-8", "LANGUAGE": "zh"}, "zh-Hant"),  # a bare zh in the script the locale names
        ({"LANG": "zh_TW.Big5", "LANGUAGE": "zh_CN:zh"}, "zh-Hans"),  # asked for by name
        ({"LANG": "en_US.UTF-8", "LANGUAGE": "zh"}, "zh-Hans"),
        ({"LANG": "zh_SG.UTF-8"}, "zh-Hans"),
        ({"LANG": "zh_Hans_HK.UTF-8"}, "zh-Hans"),  # a script named wins over the region
        ({"LANG": "fr_FR.UTF-8"}, "en"),
    ],
)
def test_the_language_comes_from_the_environment(environ: dict[str, str], tag: str) -> None:
    assert from_environment(environ).tag == tag


def test_the_browser_language_comes_from_accept_language() -> None:
    assert negotiate("fr-CH, fr;q=0.9, zh-CN;q=0.8, en;q=0.5").tag == "zh-Hans"
    assert negotiate("en;q=0.2, ar;q=0.9").tag == "ar"
    assert negotiate("").tag == "en" and negotiate("ar;q=0").tag == "en" and negotiate("de, *;q=0.5").tag == "en"
    assert negotiate("zh-Hant, de").tag == "zh-Hant" and negotiate("zh-TW,zh;q=0.9,en;q=0.8").tag == "zh-Hant"
    assert negotiate("zh-HK").tag == "zh-Hant" and negotiate("zh-mo").tag == "zh-Hant"
    assert negotiate("zh-Hant-TW;q=0.4, zh-CN;q=0.8").tag == "zh-Hans" and negotiate("zh").tag == "zh-Hans"
    assert negotiate("en;q=0.1, zh-Hans-HK").tag == "zh-Hans" and negotiate("zh-SG").tag == "zh-Hans"
    assert negotiate("zh-TW").locale.territory == "TW"  # the region's numbers and dates


def test_numbers_and_dates_in_hints_and_answers_follow_the_locale() -> None:
    big = NumberField(name="n", minimum=1000, maximum=250000.5)
    assert hint(big, ENGLISH) == ["a number", "from 1,000 to 250,000.5"]
    assert hint(big, language("zh")) == ["数字", "从 1,000 到 250,000.5"]
    day = StringField(name="d", format="date")
    assert show(day, "2026-11-25", language("zh")) == "2026-11-25（2026年11月25日）"
    assert show(day, "2026-11-25", language("ar")) == "2026-11-25 (25 نوفمبر 2026)"
    today = date.today()
    assert f"{today.isoformat()}, {ENGLISH.date(today)}" in hint(day, ENGLISH)[1]


def test_a_validation_message_is_english_on_the_wire_and_translated_for_the_person() -> None:
    form = Form.from_schema({"type": "object", "properties": {"n": {"type": "integer", "maximum": 12}}})
    with pytest.raises(InvalidAnswer) as caught:
        form.validate({"n": 13})
    (error,) = caught.value.errors
    assert isinstance(error, FieldError) and error.message == "must be at most 12" and error.text is not None
    assert language("zh").text(error.text) == "不能大于 12" and language("ar").text(error.text) == "يجب ألا يزيد على 12"


# ---- the terminal --------------------------------------------------------------------------------------------------

RTL_SERVER = Implementation(name="maktab", version="1.0", title="مكتب الحجز")
CHINESE_FORM = Form.from_schema(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "姓名"},
            "guests": {"type": "integer", "title": "入住人数", "minimum": 1, "maximum": 12},
            "city": {"type": "string", "title": "City"},
        },
        "required": ["name", "guests"],
    }
)


@pytest.mark.anyio
async def test_line_mode_in_chinese_isolates_the_servers_words(anyio_backend: str) -> None:
    handler, shown = scripted_terminal(["", "李雷", "十三", "3", "上海", ""], isolates=True, lang="zh")
    req = ElicitationRequest("请预订房间", CHINESE_FORM, RTL_SERVER)
    assert await handler(req) == Accepted({"name": "李雷", "guests": 3, "city": "上海"})
    text = "\n".join(shown)
    assert (
        f"── {FSI}مكتب الحجز 1.0{PDI} 提问（服务器名称：{FSI}maktab{PDI}）──" in text
    )  # an Arabic title cannot reorder the Chinese around it
    assert "现在回答吗？[Enter] 是，d = 拒绝，c = 取消：" in text
    assert f"{FSI}入住人数{PDI}（必填）" in text and "整数; 从 1 到 12" not in text and "整数；从 1 到 12" in text
    assert "应为整数" in text  # "十三" is not a number a person can type here
    assert "检查：" in text and f"  2. {FSI}入住人数{PDI}：{FSI}3{PDI}" in text


FULLWIDTH_FORM = Form.from_schema(
    {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date", "title": "入住日期"},
            "email": {"type": "string", "format": "email", "title": "邮箱"},
            "nights": {"type": "number", "title": "晚数"},
            "note": {"type": "string", "title": "备注"},
        },
    }
)
FULLWIDTH = ["２０２６－１１－２５", "ｌｉ＠例子。中国", "２．５", "ｌｉ＠ｌｅｉ"]  # an input method in full-width mode


@pytest.mark.anyio
async def test_what_an_input_method_types_in_full_width_is_read_as_ascii(anyio_backend: str) -> None:
    """A date, an email address and a number typed in full-width mode are what they read as: sent as ASCII, not
    refused. Free text is sent exactly as typed."""
    handler, shown = scripted_terminal(["", *FULLWIDTH, ""], lang="zh")
    req = ElicitationRequest("请填写", FULLWIDTH_FORM, Implementation(name="hotel", version="1"))
    outcome = await handler(req)
    assert outcome == Accepted({"day": "2026-11-25", "email": "li@例子.中国", "nights": 2.5, "note": "ｌｉ＠ｌｅｉ"})
    assert not any("✗" in line or "应为" in line for line in shown), shown


EXTRAS_ZH = Form.from_schema(
    {
        "type": "object",
        "properties": {
            "extras": {"type": "array", "title": "加購", "items": {"anyOf": [
                {"const": "b", "title": "早餐"}, {"const": "p", "title": "停車位"},
                {"const": "m", "title": "午餐、晚餐套票"}]}},
        },
    }
)  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("typed", "chosen"),
    [("早餐、停車位", ["b", "p"]), ("早餐，３", ["b", "m"]), ("午餐、晚餐套票", ["m"]), ("１、２", ["b", "p"])],
)
async def test_the_line_mode_reads_a_chinese_list_written_with_the_enumeration_comma(
    anyio_backend: str, typed: str, chosen: list[str]
) -> None:
    """A Chinese list is written with 、 (早餐、停車位): it was read as one name no choice has, and refused. A choice
    whose own name holds one (午餐、晚餐套票) is still that choice."""
    handler, shown = scripted_terminal(["", typed, "早餐", ""], lang="zh-TW")
    outcome = await handler(ElicitationRequest("請選擇", EXTRAS_ZH, RTL_SERVER))
    assert outcome == Accepted({"extras": chosen}), shown


YES_NO_ZH = Form.from_schema({"type": "object", "properties": {"ok": {"type": "boolean", "title": "確定入住嗎"}}})
URL_ZH = UrlElicitationRequest("請在銀行的網頁上完成付款。", "https://bank.example/pay", None)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("lines", "form", "outcome"),
    [
        (["ｙ"], YES_NO_ZH, Accepted({"ok": True})),  # a yes/no question's own prompt
        (["ｄ"], CHINESE_FORM, Declined()),  # "Answer now?"
        (["", "李雷", "３", "", "２", "２", "ｃ", ""], CHINESE_FORM, Cancelled()),  # review: edit field 2, then cancel
        (["", "李雷", "３", "－", "Ｄ"], CHINESE_FORM, Declined()),  # '-' leaves City empty
        (["拒絕"], URL_ZH, Declined()),  # the URL consent takes the words its prompt says, as the others do
        (["ｎ"], URL_ZH, Declined()),
    ],
)
async def test_the_line_modes_letters_typed_in_full_width_mean_the_same(
    anyio_backend: str, lines: list[str], form: Any, outcome: Any
) -> None:
    """An input method left in full-width mode types fullwidth y, d, 2, -: the line mode's answers, commands and
    numbers are read as the letters they are (they were refused, or asked again, or taken as a City)."""
    handler, shown = scripted_terminal(lines, lang="zh-TW")
    if isinstance(form, UrlElicitationRequest):
        assert await handler.url(form) == outcome
        return
    assert await handler(ElicitationRequest("請預訂房間", form, RTL_SERVER)) == outcome
    assert not any("請回答" in line for line in shown), shown


BANK = UrlElicitationRequest.from_params(
    {"message": "请在银行的网页上完成付款。", "url": "https://銀行.台灣/付款"}, Implementation(name="bank", version="1")
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("lang", "url_line", "host_line"),
    [
        ("zh", "  网址：https://銀行.台灣/付款", "  主机：銀行.台灣"),
        ("zh-TW", "  網址：https://銀行.台灣/付款", "  主機：銀行.台灣"),
        ("en", "  URL:  https://銀行.台灣/付款", "  Host: 銀行.台灣"),
    ],
)
async def test_the_line_modes_url_and_host_start_in_one_column_with_no_space_after_a_full_width_colon(
    anyio_backend: str, lang: str, url_line: str, host_line: str
) -> None:
    """In Chinese both labels take six cells: the URL was written two spaces after its colon and the host one, so
    they started a cell apart, each after a gap Chinese does not leave after a full-width colon."""
    handler, shown = scripted_terminal(["d"], lang=lang)
    assert await handler.url(BANK) == Declined()
    assert url_line in shown and host_line in shown, shown


@pytest.mark.anyio
async def test_chinese_sentences_and_labels_on_the_full_screen_leave_no_gap_after_full_width_marks(
    anyio_backend: str,
) -> None:
    seen: list[str] = []
    async with screen_handler(Size(rows=30, columns=80), lang="zh") as (handler, screen):

        async def drive() -> None:
            await screen.shows("尚未打开")
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, BANK, drive)
    form = Form.from_schema({"type": "object", "properties": {"n": {"type": "string", "title": "姓名"}}})
    retry = ElicitationRequest("请填写", form, RTL_SERVER, previous={"n": "x"}, errors=(FieldError("n", "太短"),))
    async with screen_handler(Size(rows=30, columns=80), lang="zh") as (handler, screen):

        async def drive() -> None:
            await screen.shows("太短")
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, retry, drive)
    assert "主机：銀行.台灣" in seen[0], seen[0]
    assert "您上次的回答未被接受：姓名：太短" in seen[1], seen[1]


@pytest.mark.anyio
async def test_required_in_chinese_follows_the_label_without_a_gap(anyio_backend: str) -> None:
    """The Chinese "(required)" opens with a full-width bracket, which has its own room: the line mode and the page
    put a space before it, as before the English words."""
    from elicitor.client._browser._html import _field

    handler, shown = scripted_terminal(["", "李雷", "3", "", ""], lang="zh")
    assert await handler(ElicitationRequest("请预订房间", CHINESE_FORM, RTL_SERVER)) == Accepted(
        {"name": "李雷", "guests": 3}
    )
    assert "姓名（必填）" in shown and "City（选填）" in shown, shown
    name = CHINESE_FORM.fields[0]
    assert "<bdi>姓名</bdi><span class=req>（必填）</span>" in _field(name, None, language("zh"))
    assert "<bdi>姓名</bdi> <span class=req>(required)</span>" in _field(name, None, ENGLISH)


@pytest.mark.anyio
async def test_connects_json_arguments_say_where_they_go_wrong_in_the_persons_language(anyio_backend: str) -> None:
    """Arguments typed as JSON that do not parse were refused with Python's English reason ("不是有效的 JSON:
    Expecting ',' delimiter: line 1 column 12 (char 11)"); the line and the column say where, in Chinese."""
    from elicitor._connect import _arguments
    from elicitor.types import Tool

    schema = {"type": "object", "properties": {"where": {"type": "object"}}, "required": ["where"]}
    handler, shown = scripted_terminal(['{"where": 1', '{"where": {"a": 1}}'], lang="zh")
    assert await _arguments(handler, Tool(name="place", input_schema=schema)) == {"where": {"a": 1}}
    assert "  不是有效的 JSON：第 1 行第 12 列有误。" in shown, shown
    assert not any("Expecting" in line for line in shown), shown


def test_the_pages_last_words_and_connects_advice_follow_a_chinese_full_stop_without_a_gap() -> None:
    from elicitor.client._browser._handler import _finished

    zh = language("zh")
    assert "您的回答已发送。您可以关闭此标签页。" in _finished("x", zh._("Your answer was sent."), zh).decode()
    assert "Your answer was sent. You can close this tab." in _finished("x", "Your answer was sent.", ENGLISH).decode()
    from .conftest import free_port

    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", f"http://127.0.0.1:{free_port()}/mcp"], capture_output=True,
        text=True, timeout=120, cwd=ROOT, env={**os.environ, "LANG": "zh_CN.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip
    said = run.stdout + run.stderr
    assert run.returncode == 1 and "。服务器是否正在运行" in said, said


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_page_reads_an_email_address_typed_in_full_width_as_ascii(anyio_backend: str) -> None:
    links: list[str] = []
    request = ElicitationRequest("请填写", FULLWIDTH_FORM, Implementation(name="hotel", version="1"))
    answered: list[Any] = []

    def opened(url: str) -> bool:
        links.append(url)
        return True

    async def ask(handler: BrowserHandler) -> None:
        answered.append(await handler(request))

    async with (
        BrowserHandler(open_url=opened, write=lambda text: None, lang="zh") as handler,
        anyio.create_task_group() as tg,
    ):
        tg.cancel_scope.deadline = anyio.current_time() + 30  # a hang guard: the answer never sent
        tg.start_soon(ask, handler)
        with anyio.fail_after(10):
            while not links:
                await anyio.sleep(0.01)
        typed = {"day": "2026-11-25", "email": FULLWIDTH[1], "nights": "2.5", "note": FULLWIDTH[3]}
        async with httpx2.AsyncClient() as browser:
            review = await browser.post(links[0], data={**typed, "_action": "review"})
            assert "li@例子.中国" in review.text and "✗" not in review.text
            await browser.post(links[0], data={"_action": "send"})
    assert answered == [Accepted({"day": "2026-11-25", "email": "li@例子.中国", "nights": 2.5, "note": "ｌｉ＠ｌｅｉ"})]


def test_a_dumb_terminal_gets_the_line_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert TerminalHandler()._screen is not None
    monkeypatch.setenv("TERM", "dumb")
    assert TerminalHandler()._screen is None


@pytest.mark.anyio
async def test_no_color_draws_the_full_screen_in_one_colour(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With NO_COLOR the errors and the required marks are still there, in words and signs, in no colour."""
    errors = (FieldError("guests", "must be at most 12", N_("must be at most {n}", n=12)),)
    req = ElicitationRequest("请预订房间", CHINESE_FORM, RTL_SERVER, errors=errors, previous={"guests": 13})
    for no_color, coloured in (("", True), ("1", False)):
        monkeypatch.setenv("NO_COLOR", no_color)
        async with screen_handler() as (handler, screen):

            async def drive(coloured: bool = coloured) -> None:
                await screen.shows("must be at most 12")
                drawn = {(c.fg, c.bg) for row in screen.screen.buffer.values() for c in row.values()}
                assert (drawn != {("default", "default")}) is coloured, drawn
                assert "✗ must be at most 12" in screen.text() and "入住人数 *" in screen.text()
                await screen.type("\x1b")

            await answer(handler, req, drive)


_SGR = {"black": 30, "red": 31, "green": 32, "brown": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}


def ansi(screen: Any) -> str:
    """The emulated screen as text with its colours (what ``tmux capture-pane -e`` gives), for scripts/pictures.py."""
    lines = []
    for y in range(screen.screen.lines):
        out, last = [], None
        for x in range(screen.screen.columns):
            c = screen.screen.buffer[y][x]
            if c.data == "":
                continue  # the second cell of a wide character
            codes = [0] + [1] * c.bold + [7] * c.reverse + [4] * c.underscore
            for value, base in ((c.fg, 0), (c.bg, 10)):
                if value in _SGR:
                    codes.append(_SGR[value] + base)
                elif value.startswith("bright") and value[6:] in _SGR:
                    codes.append(_SGR[value[6:]] + 60 + base)
            if codes != last:
                out.append("\x1b[" + ";".join(map(str, codes)) + "m")
                last = codes
            out.append(c.data)
        lines.append("".join(out).rstrip() + "\x1b[0m")
    return "\n".join(lines)


def cells(screen: Any, row: int) -> list[str]:
    """One row of the emulated terminal, cell by cell (a wide character's second cell is "")."""
    return [screen.screen.buffer[row][x].data for x in range(screen.screen.columns)]


def column_of(screen: Any, text: str) -> tuple[int, int]:
    """(row, cell) where ``text`` starts on the emulated screen, counted in cells."""
    for y in range(screen.screen.lines):
        row = cells(screen, y)
        for x in range(len(row)):
            if "".join(c for c in row[x : x + 2 * len(text)] if c).startswith(text) and row[x]:
                return y, x
    raise AssertionError(f"{text!r} is not on the screen:\n{screen.text()}")


@pytest.mark.anyio
async def test_the_full_screen_in_chinese_lines_up_by_cells(anyio_backend: str) -> None:
    """Chinese labels take two cells a character: the review's answers start in one column, the form's buttons
    are as wide as their words, and what a person types (Chinese too) is read back whole."""
    async with screen_handler(Size(rows=24, columns=90), lang="zh") as (handler, screen):
        seen: dict[str, str] = {}

        async def drive() -> None:
            await screen.shows("提问")
            seen["form"] = screen.text()
            (ROOT / "artifacts").mkdir(exist_ok=True)  # the documentation's picture (scripts/pictures.py)
            (ROOT / "artifacts" / "terminal-form-zh.ansi").write_text(ansi(screen))
            await screen.type("李雷", TAB, "3", TAB, "上海", TAB, ENTER)
            await screen.shows("发送之前，请检查您的回答")
            seen["review"] = screen.text()
            # Each answer starts right after its label and the full-width colon, counted in cells: 姓名 is four
            # cells, 入住人数 eight, the colon two; a layout by code points would put them two or four cells early.
            for label, width, value in (("姓名", 4, "李雷"), ("入住人数", 8, "3"), ("City", 4, "上海")):
                row, x = column_of(screen, label + "：")
                assert column_of(screen, value) == (row, x + width + 2), seen["review"]
                assert cells(screen, row)[x + 1] == ("" if label != "City" else "i")  # a wide letter's 2nd cell
            await screen.type(ENTER)

        outcome = await answer(handler, ElicitationRequest("请预订房间", CHINESE_FORM, RTL_SERVER), drive)
    assert outcome == Accepted({"name": "李雷", "guests": 3, "city": "上海"})
    form = seen["form"]
    assert "مكتب الحجز 1.0 提问 (服务器名称：maktab)" in form.splitlines()[0] or "提问（服务器名称：maktab）" in form
    assert "< 检查 >" in form and "< 拒绝 >" in form and "< 取消 >" in form
    assert "入住人数 *" in form and "整数 · 从 1 到 12" in form
    assert "Tab / Shift-Tab 移动" in form


@pytest.mark.anyio
async def test_a_long_chinese_title_wraps_in_the_banner_and_hides_nothing(anyio_backend: str) -> None:
    """A title wider than the terminal (twenty Chinese characters fill forty cells) goes on over the banner's next
    lines: "asks" and the server's own name stay on screen, where one line cut at the edge used to hide them."""
    title = "东京寿司店的非常非常长的名字用来测试横幅是否会被截断"
    server = Implementation(name="chef", version="1.0", title=title)
    async with screen_handler(Size(rows=24, columns=41), lang="zh") as (handler, screen):
        seen: list[str] = []

        async def drive() -> None:
            await screen.shows("请选择")
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, ElicitationRequest("请选择", CHINESE_FORM, server), drive)
    lines = seen[0].splitlines()
    rows = next(i for i, line in enumerate(lines) if line.strip() in ("", "^"))  # up to a blank one, or the pane's
    banner = "".join(line.strip() for line in lines[:rows])
    assert banner == f"{title} 1.0 提问（服务器名称：chef）", seen[0]


@pytest.mark.anyio
async def test_a_chinese_description_wraps_where_chinese_breaks_and_an_english_one_between_words(
    anyio_backend: str,
) -> None:
    """The form's text (a server's message and descriptions) is laid out in lines the way each language breaks:
    prompt_toolkit cut at the last cell that fit, so a Chinese comma began the next line (at 60 columns, the one
    after 英文姓名) and an English word was split across two lines. Nothing is lost or added: the lines read back
    as sent."""
    about = "請填寫您護照上的中文姓名，如果沒有中文姓名，請填寫英文姓名，這段說明故意寫得很長以測試換行"
    english = "Write the name exactly as it is printed in the passport, including every middle name you have"
    form = Form.from_schema(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "姓名", "description": about},
                "latin": {"type": "string", "title": "Name", "description": english},
            },
        }
    )
    shown: list[str] = []
    async with screen_handler(Size(rows=30, columns=60), lang="zh-TW") as (handler, screen):

        async def drive() -> None:
            # The second field's description is drawn last: wait for its last word, so the frame read is whole.
            await screen.shows("you have")
            shown.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, ElicitationRequest("請填寫訂房資料。", form, RTL_SERVER), drive)
    lines = [line.strip() for line in shown[0].splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("請填寫您"))
    assert "".join(lines[start : start + 2]) == about and not lines[start + 1].startswith("，"), shown[0]
    start = next(i for i, line in enumerate(lines) if line.startswith("Write the"))
    assert " ".join(lines[start : start + 2]) == english, shown[0]  # broken at a space, no word cut


@pytest.mark.anyio
async def test_a_long_chinese_answer_wraps_in_its_field_and_stays_whole_on_screen(anyio_backend: str) -> None:
    """A field was one row high: past thirty Chinese characters at 60 columns only the last wrapped line showed,
    the start of the sentence and the prompt mark gone. The field grows by lines as the text wraps."""
    said = "我們一家四口預計晚上十點左右抵達，請幫忙保留房間並準備兩張加床，謝謝您的協助與安排"
    async with screen_handler(Size(rows=30, columns=60), lang="zh-TW") as (handler, screen):
        seen: list[str] = []

        async def drive() -> None:
            await screen.shows("入住人数")  # the server's title, as sent
            await screen.type("李雷", TAB, "3", TAB)
            await screen.type(said)
            await screen.shows("協助與安排")
            seen.append(screen.text())
            await screen.type(TAB, ENTER)
            await screen.shows("送出之前")
            await screen.type(ENTER)

        outcome = await answer(handler, ElicitationRequest("請預訂房間", CHINESE_FORM, RTL_SERVER), drive)
    assert outcome == Accepted({"name": "李雷", "guests": 3, "city": said})
    lines = [line.strip() for line in seen[0].splitlines()]
    first = next(i for i, line in enumerate(lines) if line.startswith("› 我們"))
    last = lines.index("", first)
    assert "".join(lines[first:last]).removeprefix("› ") == said and last - first > 1, seen[0]


@pytest.mark.anyio
async def test_an_error_wider_than_the_rest_of_the_form_takes_one_line_where_it_fits(anyio_backend: str) -> None:
    """The form was as wide as its widest line measured as last wrapped: an error longer than anything else on it
    broke at the buttons' width (28 cells in Chinese) in a terminal of 90 columns."""
    form = Form.from_schema(
        {"type": "object", "properties": {"email": {"type": "string", "format": "email", "title": "邮箱"}}}
    )
    async with screen_handler(Size(rows=24, columns=90), lang="zh") as (handler, screen):
        seen: list[str] = []

        async def drive() -> None:
            await screen.type("abc", TAB, ENTER)
            await screen.shows("个字段")  # the summary under the form, drawn after the field's error
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, ElicitationRequest("请填写", form, RTL_SERVER), drive)
    assert "✗ 应为电子邮件地址，例如 name@example.com" in [line.strip() for line in seen[0].splitlines()], seen[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("columns", "lines"),
    [
        (60, ["Tab / Shift-Tab 移動 · 空白鍵勾選 ·", "Enter 下一項或按下按鈕 · Esc 取消"]),
        (70, ["Tab / Shift-Tab 移動 · 空白鍵勾選 · Enter 下一項或按下按鈕 ·", "Esc 取消"]),  # not "Esc 取" / "消"
    ],
)
async def test_the_keys_help_goes_on_a_second_line_rather_than_hide_how_to_leave(
    anyio_backend: str, columns: int, lines: list[str]
) -> None:
    """At 60 columns the Traditional Chinese key help (62 cells) was cut at the edge, and with it "Esc 取消"; at 70
    it broke between 取 and 消. It breaks only between keys, each next line a cell in as the first."""
    async with screen_handler(Size(rows=30, columns=columns), lang="zh-TW") as (handler, screen):
        seen: list[str] = []

        async def drive() -> None:
            await screen.shows("空白鍵勾選")
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, ElicitationRequest("請預訂房間", CHINESE_FORM, RTL_SERVER), drive)
    bottom = [line.rstrip() for line in seen[0].splitlines() if line.strip()][-2:]
    assert bottom == [f" {line}" for line in lines], seen[0]


@pytest.mark.anyio
async def test_the_full_screen_in_arabic_keeps_the_servers_words_as_sent(anyio_backend: str) -> None:
    async with screen_handler(lang="ar") as (handler, screen):

        async def drive() -> None:
            await screen.shows("يسأل")
            text = screen.text()
            assert "مكتب الحجز 1.0" in text and "请预订房间" in text  # the server's words, untranslated
            assert "< مراجعة >" in text and "< رفض >" in text and "< إلغاء >" in text
            assert "عدد صحيح · من 1 إلى 12" in text
            await screen.type("x", TAB, "3", TAB, TAB, ENTER)
            await screen.shows("راجع إجابتك قبل إرسالها")
            await screen.type(ENTER)

        outcome = await answer(handler, ElicitationRequest("请预订房间", CHINESE_FORM, RTL_SERVER), drive)
    assert outcome == Accepted({"name": "x", "guests": 3})


# ---- the browser ---------------------------------------------------------------------------------------------------

server = Server("maktab", "1.0", title="مكتب الحجز")


@server.tool()
async def book(ctx: Context) -> str:
    outcome = await ctx.elicit("Book a table? 订座吗？", CHINESE_FORM)
    return str(outcome.action)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_page_follows_accept_language_and_its_switch(anyio_backend: str) -> None:
    links: list[str] = []
    pages: dict[str, str] = {}

    async def person() -> None:
        while not links:
            await anyio.sleep(0.01)
        async with httpx2.AsyncClient(headers={"accept-language": "zh-CN,zh;q=0.9,en;q=0.5"}) as browser:
            pages["zh"] = (await browser.get(links[0])).text
            taiwan = {"accept-language": "zh-TW,zh;q=0.9,en-US;q=0.8,en;q=0.7"}  # what a browser in Taiwan sends
            pages["hant"] = (await browser.get(links[0], headers=taiwan)).text
            pages["ar"] = (await browser.get(links[0] + "?lang=ar")).text
            pages["kept"] = (await browser.get(links[0])).text  # the switch is remembered for this question
            pages["sent"] = (await browser.post(links[0], data={"_action": "decline"})).text

    def opener(url: str) -> bool:
        links.append(url)
        return True

    async with BrowserHandler(open_url=opener, write=lambda t: None) as handler, anyio.create_task_group() as tg:
        tg.start_soon(person)
        async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
            with anyio.fail_after(20):
                assert (await client.call_tool("book")).text == "decline"
    zh, ar = pages["zh"], pages["ar"]
    assert '<html lang="zh-Hans" dir="ltr">' in zh and "<title>مكتب الحجز 1.0 提问</title>" in zh
    assert "<bdi>مكتب الحجز 1.0</bdi> 提问：" in zh and '<p class=message dir="auto">Book a table? 订座吗？</p>' in zh
    assert "<bdi>入住人数</bdi><span class=req>（必填）</span>" in zh and ">检查</button>" in zh
    assert re.search(r'<a href="\?lang=zh-Hans" lang="zh-Hans" hreflang="zh-Hans" aria-current="true">简体中文</a>', zh)
    hant = pages["hant"]
    assert '<html lang="zh-Hant" dir="ltr">' in hant and "<bdi>入住人數</bdi>" not in hant  # the server's words as sent
    assert "<bdi>入住人数</bdi><span class=req>（必填）</span>" in hant and ">檢查</button>" in hant
    assert ">拒絕</button>" in hant and ">取消</button>" in hant and "<title>مكتب الحجز 1.0 提問</title>" in hant
    assert re.search(
        r'<a href="\?lang=zh-Hant" lang="zh-Hant" hreflang="zh-Hant" aria-current="true">繁體中文</a>', hant
    )
    assert '<html lang="ar" dir="rtl">' in ar and ">مراجعة</button>" in ar and "<bdi>مكتب الحجز 1.0</bdi> يسأل:" in ar
    assert '<html lang="ar" dir="rtl">' in pages["kept"]
    assert "لقد رفضت." in pages["sent"] and "يمكنك إغلاق علامة التبويب هذه." in pages["sent"]


def test_elicitor_lang_puts_connect_in_chinese() -> None:
    """`elicitor --lang zh connect`: the server's question in Chinese words of elicitor's, the server's own as sent."""
    lines = ["test_elicitation", "Who are you?", "", "Ada", "ada@example.com", "", "q"]
    server = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "--lang", "zh", "connect", "--ui", "lines", "--protocol", "2025-11-25",
         *server],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = unisolated(run.stderr)
    assert "── elicitor conformance fixtures 1.0.0 提问（服务器名称：elicitor-everything）──\nWho are you?" in out
    assert "现在回答吗？[Enter] 是，d = 拒绝，c = 取消：" in out and "检查：" in out


def connect_in(lang: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """``elicitor --lang LANG connect`` to the example server, a person typing ``lines`` (line mode)."""
    server = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    return subprocess.run(
        [sys.executable, "-m", "elicitor", "--lang", lang, "connect", "--ui", "lines", "--protocol", "2025-11-25",
         *server],
        input="".join(line + "\n" for line in lines), capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip


def test_connects_own_lines_are_in_chinese_and_arabic() -> None:
    """connect's own lines (connected, the menu's prompt, an unknown tool, progress, a result) in the person's
    language; the server's words (its title, tool names and descriptions, the result's text) as sent."""
    run = connect_in("zh", ["nope", "test_tool_with_progress", "q"])
    assert run.returncode == 0, run.stderr
    out = unisolated(run.stderr)
    assert "已连接到 elicitor conformance fixtures 1.0.0，协议版本 2025-11-25。" in out
    assert "要调用的工具（输入编号或名称；按 Enter 或 q 退出）：" in out and "Tool to call" not in out
    assert "没有名为 'nope' 的工具。" in out and "进度 50/100" in out
    assert "结果：Tool with progress executed successfully" in run.stdout
    run = connect_in("ar", ["nope", "q"])
    assert run.returncode == 0, run.stderr
    assert "تم الاتصال بـ elicitor conformance fixtures 1.0.0، البروتوكول 2025-11-25." in run.stderr
    assert "الأداة المراد استدعاؤها (رقمها أو اسمها؛ Enter أو q للخروج): " in run.stderr
    assert "لا توجد أداة باسم 'nope'." in run.stderr


ECHO = """
from elicitor import Server

server = Server("echo", "1.0", title="回聲")


@server.tool()
async def say() -> str:
    return "𠮷野家 简体 繁體"


if __name__ == "__main__":
    server.run()
"""


def test_a_result_the_terminals_encoding_lacks_is_written_escaped_not_a_crash(tmp_path: Path) -> None:
    """In a Big5 locale (zh_TW.Big5; PYTHONIOENCODING stands in for it here) a result holding 𠮷 or a Simplified
    character (简, not in Big5) ended connect with a UnicodeEncodeError traceback: it is written escaped, as
    standard error writes what it cannot encode, and the rest as it reads."""
    (tmp_path / "echo.py").write_text(ECHO)
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", sys.executable, str(tmp_path / "echo.py")],
        input=b"say\nq\n", capture_output=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "big5", "LANG": "zh_TW.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr.decode("big5", "replace")
    assert "結果：\\U00020bb7野家 \\u7b80体 繁體" in run.stdout.decode("big5")


@pytest.mark.parametrize(
    ("argv", "environ", "said"),
    [
        (["--lang", "zh", "connect", "--ui", "nope", "x"], {},
         "elicitor connect：错误：参数 --ui：无效的选择：'nope'（可选：'terminal', 'lines', 'browser'）"),
        (["serve", "app:server", "--port", "abc"], {"LANG": "zh_CN.UTF-8"},
         "elicitor serve：错误：参数 --port：无效的 int 值：'abc'"),
        (["serve", "app:server", "--port", "abc"], {"LANG": "zh_TW.UTF-8"},
         "elicitor serve：錯誤：參數 --port：無效的 int 值：'abc'"),
        (["serve"], {"LANG": "en_US.UTF-8", "LANGUAGE": "zh_TW:zh"}, "elicitor serve：錯誤：缺少下列必要參數：target"),
        (["--lang", "zh-HK", "connect", "--ui", "nope", "x"], {"LANG": "zh_CN.UTF-8"},
         "elicitor connect：錯誤：參數 --ui：無效的選擇：'nope'（可選擇：'terminal', 'lines', 'browser'）"),
        (["serve"], {"LC_MESSAGES": "ar_EG.UTF-8"}, "elicitor serve: خطأ: الوسائط التالية مطلوبة: target"),
        (["--lang=en", "serve"], {"LANG": "zh_CN.UTF-8"}, "elicitor serve: error: the following arguments are"),
        (["--lang", "fr", "demo"], {"LANG": "zh_CN.UTF-8"},
         "elicitor：错误：--lang：elicitor 没有 'fr' 的语言目录；它支持的语言有 en、zh-Hans、zh-Hant、ar"),
        (["--lang=fr", "demo"], {"LANG": "C.UTF-8"}, "elicitor: error: --lang: elicitor has no catalog for 'fr'"),
        # serve's own refusals: in the person's language, after the colon their language writes
        (["serve", "--auth-introspect", "http://x", "tests.peers.cli_server:server"], {"LANG": "zh_CN.UTF-8"},
         "elicitor serve：--auth-introspect 需要同时提供 --auth-client-id 和 --auth-client-secret"),
        (["serve", "--auth-introspect", "http://x", "tests.peers.cli_server:server"], {"LANG": "C.UTF-8"},
         "elicitor serve: --auth-introspect needs --auth-client-id and --auth-client-secret"),
        (["serve", "nowhere:server"], {"LANG": "zh_TW.UTF-8"}, "elicitor serve：無法載入 'nowhere:server'"),
        # why it will not start, and a malformed --metrics: the library's reason said in the person's words too
        (["serve", "--redis", "redis://127.0.0.1:1/0", "tests.peers.cli_server:server"],
         {"LANG": "zh_CN.UTF-8", "ELICITOR_STATE_KEYS": ""},
         "elicitor serve：未启动：此服务器的状态共享在 Redis 中，每个副本都必须用相同的密钥封存 requestState："
         "请在所有副本上设置 ELICITOR_STATE_KEYS（python -c 'import elicitor.server as s; print(s.generate_key())'）"),
        (["serve", "--redis", "redis://127.0.0.1:1/0", "tests.peers.cli_server:server"],
         {"LANG": "zh_TW.UTF-8", "ELICITOR_STATE_KEYS": ""}, "elicitor serve：未啟動：此伺服器的狀態共享於 Redis，"),
        (["serve", "--redis", "redis://127.0.0.1:1/0", "tests.peers.cli_server:server"],
         {"LANG": "C.UTF-8", "ELICITOR_STATE_KEYS": ""},
         "elicitor serve: not starting: this server shares its state in Redis, so every replica must seal"),
        (["serve", "--metrics", "abc", "tests.peers.cli_server:server"], {"LANG": "zh_CN.UTF-8"},
         "elicitor serve：--metrics 的值应为 [HOST:]PORT（例如 9464 或 0.0.0.0:9464），而不是 'abc'"),
        (["--lang", "zh-TW", "serve", "--metrics", "0.0.0.0:", "tests.peers.cli_server:server"], {},
         "elicitor serve：--metrics 的值應為 [HOST:]PORT（例如 9464 或 0.0.0.0:9464），而非 '0.0.0.0:'"),
        (["serve", "--metrics", "9464", "tests.peers.cli_server:server"],
         {"LANG": "zh_CN.UTF-8", "ELICITOR_TELEMETRY_MODE": "loud"},
         "elicitor serve：ELICITOR_TELEMETRY_MODE 必须是 native, propagation_only, off 之一，而不是 'loud'"),
        # the environment's mistakes, met while the module makes its Server or when serve opens the store
        (["serve", "tests.peers.cli_server:server"], {"LANG": "zh_TW.UTF-8", "ELICITOR_STATE_KEYS": "short"},
         "elicitor serve：無法載入 'tests.peers.cli_server:server'：ELICITOR_STATE_KEYS 中的金鑰必須是 base64 編碼的 "
         "32 位元組（AES-256），可用 python -c 'import elicitor.server as s; print(s.generate_key())' 產生"),
        (["serve", "tests.peers.cli_server:server"], {"LANG": "zh_CN.UTF-8", "ELICITOR_REDIS_URL": "memcached://x"},
         "elicitor serve：未知的状态存储 'memcached://x'：请使用 redis:// URL，或留空以使用内存"),
    ],
)  # fmt: skip
def test_a_mistyped_command_line_is_explained_in_the_persons_language(
    argv: list[str], environ: dict[str, str], said: str
) -> None:
    """argparse's own sentences (an unknown choice, a missing argument, a value that is not a number) come from
    the catalogs too, in the language ``--lang`` names (read before the parsing that fails) or the environment's."""
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    )  # fmt: skip
    assert run.returncode == 2 and said in run.stderr, run.stderr


def test_a_mistyped_telemetry_mode_is_warned_of_and_refused_in_one_language() -> None:
    """The warning elicitor logs while it is imported (before the command chose anything) and serve's refusal
    after it: both in the person's language, where the warning was English above a Chinese refusal."""
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "serve", "--metrics", "9464", "tests.peers.cli_server:server"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "zh_TW.UTF-8", "LC_ALL": "", "LANGUAGE": "", "ELICITOR_TELEMETRY_MODE": "loud"},
    )  # fmt: skip
    problem = "ELICITOR_TELEMETRY_MODE 必須是 native, propagation_only, off 其中之一，而非 'loud'"
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"{problem}；改用 native", f"elicitor serve：{problem}"], run.stderr


@pytest.mark.parametrize(
    ("missing", "argv", "said"),
    [
        ("uvloop", ["--loop", "uvloop"], "elicitor serve：loop='uvloop' 需要 uvloop，但它尚未安装："
         "pip install 'elicitor[speed]'"),
        ("httptools", ["--http", "httptools"], "elicitor serve：http='httptools' 需要 httptools，但它尚未安装："
         "pip install httptools"),
    ],
)  # fmt: skip
def test_serve_names_a_missing_loop_or_parser_in_the_persons_language(missing: str, argv: list[str], said: str) -> None:
    """``serve --loop uvloop`` (or ``--http httptools``) where it is not installed: what to install, in the
    person's words (the module is hidden from this process as if it were not installed)."""
    hide = f"import sys; sys.modules[{missing!r}] = None; from elicitor.cli import main; sys.exit(main())"
    run = subprocess.run(
        [sys.executable, "-c", hide, "serve", *argv, "tests.peers.cli_server:server"], capture_output=True,
        text=True, timeout=60, cwd=ROOT, env={**os.environ, "LANG": "zh_CN.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip
    assert run.returncode == 2 and run.stderr.strip() == said, run.stderr


@pytest.mark.parametrize(
    ("environ", "argv", "said"),
    [
        ({"LANG": "zh_CN.UTF-8"}, [],
         "elicitor connect：无法连接到 http://127.0.0.1:1/mcp："
         "传输错误（发生在本地，并非来自服务器）：HTTP 请求失败："),
        ({"LANG": "zh_TW.UTF-8"}, [],
         "elicitor connect：無法連線到 http://127.0.0.1:1/mcp："
         "傳輸錯誤（發生在本機，並非來自伺服器）：HTTP 請求失敗："),
        ({"LANG": "zh_CN.UTF-8"}, ["--lang", "en"], "elicitor connect: cannot connect to http://127.0.0.1:1/mcp: "
         "Transport error (local, not from the server): HTTP request failed: "),
    ],
)  # fmt: skip
def test_a_transport_failure_is_framed_in_the_persons_language(
    environ: dict[str, str], argv: list[str], said: str
) -> None:
    """``elicitor connect`` to an address where nothing listens: the frame (this side of the wire failed, not the
    server) in the person's words, the HTTP library's detail as it came, the error code unpunctuated."""
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", *argv, "connect", "http://127.0.0.1:1/mcp"], capture_output=True,
        text=True, timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1 and said in out and "32,603" not in out, out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves the old server in this loop
@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("zh-Hans", "传输错误（发生在本地，并非来自服务器）：服务器以 HTTP 404 拒绝了这条消息：Could not find session"
                    "（错误码 -32603）"),
        ("zh-Hant", "傳輸錯誤（發生在本機，並非來自伺服器）：伺服器以 HTTP 404 拒絕了這則訊息：Could not find session"
                    "（錯誤碼 -32603）"),
        ("en", "Transport error (local, not from the server): the server refused the message with HTTP 404: "
               "Could not find session (code -32603)"),
    ],
)  # fmt: skip
async def test_the_old_transports_own_failure_is_said_in_the_persons_language(
    anyio_backend: str, lang: str, said: str
) -> None:
    """A 2024-11-05 server refuses a message (it forgot the stream's session): what ``elicitor connect`` says of
    the failed call reads in the person's words, sentence and frame, the server's page quoted as it came."""
    from elicitor._connect import reason_of

    from .test_legacy_sse import OldServer, sse_url

    async with serving(OldServer()) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url)) as client:
                await client.call_tool("forget")
                with pytest.raises(JSONRPCError) as refused:
                    await client.call_tool("echo")
    assert reason_of(refused.value, language(lang)) == said


@pytest.mark.parametrize(
    ("environ", "argv", "said"),
    [
        ({"LANG": "zh_CN.UTF-8"}, [], r"elicitor：cli-desk 在 http://127\.0\.0\.1:(\d+)/mcp 提供服务（"),
        ({"LANG": "zh_TW.UTF-8"}, [], r"elicitor：cli-desk 在 http://127\.0\.0\.1:(\d+)/mcp 提供服務（"),
        ({"LANG": "zh_CN.UTF-8"}, ["--lang", "en"], r"elicitor: cli-desk at http://127\.0\.0\.1:(\d+)/mcp \("),
    ],
)  # fmt: skip
def test_serve_says_where_it_listens_in_the_persons_language(
    environ: dict[str, str], argv: list[str], said: str
) -> None:
    """The first line ``elicitor serve`` writes, where it answers, in the language of the rest of the command; asked
    for port 0, the port it got (it said 0, where nothing answers)."""
    with subprocess.Popen(
        [sys.executable, "-m", "elicitor", *argv, "serve", "--port", "0", "tests.peers.cli_server:server"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    ) as serving:  # fmt: skip
        try:
            assert serving.stderr is not None
            first = serving.stderr.readline()
            found = re.match(said, first)
            assert found is not None and found.group(1) != "0", first
            from tests.replicas import wait_for_port

            wait_for_port(int(found.group(1)), None)  # it listens where it says
        finally:
            serving.kill()
            serving.communicate(timeout=60)


CHECKED = json.dumps(
    {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "minimum": 1},
        "x": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    }}
)  # fmt: skip


TITLED = json.dumps(
    {"type": "object", "properties": {
        "s": {"type": "string", "title": "座位", "description": "您想坐哪裡？", "default": "in",
              "oneOf": [{"const": "in", "title": "室內"}, {"const": "out", "title": "露臺"}]},
    }}
)  # fmt: skip


@pytest.mark.parametrize(
    ("environ", "argv", "schema", "said"),
    [
        ({"LANG": "zh_CN.UTF-8"}, [], CHECKED,
         ["在规范允许的 elicitation schema 子集之内：共 2 个字段。", "协议版本：\n", "  2025-11-25：可以\n",
          "  2025-06-18：不可以：多选字段（x）从 2025-11-25 起才有；",
          "  n：整数，必填\n    显示为：n\n    接受：整数；至少 1\n  x：多选，选填\n    显示为：x\n    选项：a、b\n"]),
        ({"LANG": "zh_TW.UTF-8"}, [], CHECKED,
         ["協定版本：\n", "  2026-07-28：可以\n", "多選欄位（x）從 2025-11-25 起才有",
          "  n：整數，必填\n    顯示為：n\n"]),
        ({"LANG": "zh_CN.UTF-8"}, ["--lang", "en"], CHECKED,
         ["Inside the elicitation schema subset: 2 fields.\n", "Protocol revisions:\n", "  2025-11-25: yes\n",
          "  n: integer, required\n    shown as: n\n"]),
        ({"LANG": "ar_EG.UTF-8"}, [], CHECKED, ["ضمن المجموعة الجزئية لمخطط elicitation: حقلان.\n"]),  # the dual
        ({"LANG": "zh_TW.UTF-8"}, [], TITLED,
         ["  s：單選，選填\n    顯示為：座位\n    說明：您想坐哪裡？\n    預設值：\"in\"\n"
          "    選項：室內（送出 'in'）、露臺（送出 'out'）\n"]),
        ({"LANG": "zh_TW.UTF-8"}, [], '{"type": "object", "properties": {"x": {"type": "object"}}}',
         ["elicitor check：不在規格允許的 elicitation schema 子集之內：欄位 'x'：",
          "不允許巢狀物件；elicitation 表單是扁平的"]),
        ({"LANG": "zh_CN.UTF-8"}, [], '{"type": "object", "properties": {"x": {"type": "integer", "minimum": 3, '
         '"default": 1}}}',
         ["elicitor check：不在规范允许的 elicitation schema 子集之内：字段 'x'：默认值 1 无效：不能小于 3"]),
        ({"LANG": "zh_CN.UTF-8"}, [], '{"type": "object", "properties": {"x": {"type": "string", "format": "ip"}}}',
         ["elicitor check：不在规范允许的 elicitation schema 子集之内：字段 'x'：未知的格式 'ip'；"
          "允许的格式：email、uri、date、date-time"]),
        ({"LANG": "zh_CN.UTF-8"}, [], "{not json", ["elicitor check：无法将 '-' 读取为 JSON：Expecting property name"]),
        ({"LANG": "zh_TW.UTF-8"}, [], "[1]", ["elicitor check：JSON 必須是一個物件："]),
    ],
)  # fmt: skip
def test_check_gives_its_verdict_in_the_persons_language(
    environ: dict[str, str], argv: list[str], schema: str, said: list[str]
) -> None:
    """``elicitor check`` in the person's language: its verdicts (inside the subset or not, which revisions carry
    the form), the field-by-field listing and why a definition is refused; what the schema says (names, titles,
    descriptions, choices, a default) as written, Chinese in JSON unescaped."""
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", *argv, "check", "-"], input=schema, capture_output=True, text=True,
        timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert all(part in out for part in said), out


def help_of(argv: list[str], environ: dict[str, str], columns: int = 70) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", *argv, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ,
             "COLUMNS": str(columns)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.parametrize(
    ("environ", "argv", "said"),
    [
        ({"LANG": "zh_CN.UTF-8"}, ["connect"], ["位置参数：", "选项：", "显示此帮助信息并退出", "等待 MCP 握手的秒数"]),
        ({"LANG": "zh_TW.UTF-8"}, ["serve"], ["位置參數：", "遙測（OpenTelemetry）：", "每個請求都需要的權限範圍"]),
        ({"LANGUAGE": "zh_CN:en", "LANG": "en_US.UTF-8"}, [], ["运行订座演示：服务器提问，您来回答", "选项："]),
        ({"LANG": "C.UTF-8"}, ["--lang", "ar", "proxy"], ["الوسائط الموضعية:", "الخادم الأصلي"]),
    ],
)  # fmt: skip
def test_help_is_in_the_persons_language_and_fits_the_terminal(
    environ: dict[str, str], argv: list[str], said: list[str]
) -> None:
    """``--help`` was English under a Chinese locale, but for its first word: every help text, heading and argparse's
    own "show this help message and exit" now come from the catalogs. Its lines fit the terminal counted in cells
    (``textwrap`` counted code points: a Chinese line took twice the width), and the usage's continuation lines
    start under its first option, where the six cells of the Chinese "usage" place it."""
    from prompt_toolkit.utils import get_cwidth

    text = help_of(argv, environ)
    assert all(words in text for words in said), text
    for english in ("positional arguments", "options:", "show this help", "default"):
        assert english not in text, text
    lines = text.splitlines()
    assert max(get_cwidth(line) for line in lines) <= 70, text
    usage = lines[: lines.index("")]
    if len(usage) > 1:
        first = get_cwidth(usage[0][: usage[0].index(" [")]) + 1  # where the first option starts, in cells
        assert all(len(line) - len(line.lstrip()) == first for line in usage[1:]), text


def test_help_in_english_is_argparses_own() -> None:
    text = help_of(["connect"], {"LANG": "C.UTF-8"}, columns=100)
    assert "positional arguments:" in text and "show this help message and exit" in text
    assert "seconds to wait for the MCP handshake (default 30)" in text


def test_a_line_wrapped_in_chinese_never_ends_with_an_opening_mark() -> None:
    from elicitor.client._present import wrap

    text = "HTTP：透過這個 Redis 與其他副本共用工作階段和狀態（redis://host:port/db；預設：$ELICITOR_REDIS_URL）。"
    lines = wrap(text, 56)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert not any(line.endswith(("（", "「", "《")) for line in lines), lines


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_dev_auths_sign_in_page_speaks_the_browsers_language(anyio_backend: str) -> None:
    """``elicitor dev-auth``'s sign-in page, and what it says when no name is typed, were English for every
    browser; they follow ``Accept-Language`` now, what the program asked for isolated inside the sentence."""
    from elicitor.devauth import DevAuthorizationServer

    app: Any = DevAuthorizationServer("http://127.0.0.1:9")  # an ASGI app, typed loosely (dict scopes)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:9") as http:
        client = (await http.post("/register", json={"redirect_uris": ["http://127.0.0.1:1/cb"]})).json()
        query = {
            "client_id": client["client_id"], "response_type": "code", "code_challenge_method": "S256",
            "code_challenge": "x" * 43, "redirect_uri": "http://127.0.0.1:1/cb", "scope": "demo",
            "resource": "http://127.0.0.1:8000/mcp",
        }  # fmt: skip
        pages = {}
        for accept in ("zh-TW,zh;q=0.9,en;q=0.8", "zh-CN", "ar", "en-US"):
            pages[accept] = (await http.get("/authorize", params=query, headers={"accept-language": accept})).text
        refused = await http.post("/authorize", data={**query, "user": " "}, headers={"accept-language": "zh-CN"})
        unknown = await http.get(
            "/authorize", params={**query, "client_id": "nobody"}, headers={"accept-language": "zh-TW"}
        )
    zh_tw = pages["zh-TW,zh;q=0.9,en;q=0.8"]
    assert "<html lang=zh-Hant dir=ltr>" in zh_tw and "<title>開發用登入</title>" in zh_tw
    assert (
        "一個程式要求以您的身分存取 <b><bdi>http://127.0.0.1:8000/mcp</bdi></b>，權限範圍：<b><bdi>demo</bdi></b>。"
        in zh_tw
    )
    assert "<button>登入</button>" in zh_tw and "輸入任何名稱它都相信" in zh_tw
    assert "<button>登录</button>" in pages["zh-CN"] and "<html lang=ar dir=rtl>" in pages["ar"]
    assert "A program asks to act for you at <b><bdi>http://127.0.0.1:8000/mcp</bdi></b>" in pages["en-US"]
    assert refused.status_code == 400 and "请输入名字以登录。" in refused.text
    assert unknown.status_code == 400 and "這個程式尚未在這裡註冊" in unknown.text


# ---- the server's side: a Chinese answer over the wire -------------------------------------------------------------

INN = '''
import json
from elicitor import Accepted, Context, Form, Server

server = Server("inn", "1.0", title="臺北旅館")
FORM = Form.from_schema({"type": "object", "properties": {"name": {"type": "string", "title": "姓名",
    "minLength": 3, "maxLength": 3}}, "required": ["name"]})


@server.tool()
async def register(ctx: Context) -> str:
    """登記住客。"""
    outcome = await ctx.elicit("請填寫姓名（三個字）", FORM)
    return json.dumps(outcome.data, ensure_ascii=False) if isinstance(outcome, Accepted) else outcome.action


if __name__ == "__main__":
    server.run("stdio")
'''
ESCAPED = json.dumps({"name": "𠮷野家"})  # ensure_ascii: "\ud842\udfb7\u91ce\u5bb6", one character a surrogate pair


def ascii_json(message: dict[str, Any]) -> bytes:
    """A message as a client that escapes everything outside ASCII writes it (Python's json.dumps by default)."""
    data = json.dumps(message).encode()
    assert data.isascii() and b"\\ud842\\udfb7" in data
    return data


@pytest.mark.parametrize(("encoding", "lang", "result"), [("gb18030", "zh", "结果："), ("big5", "zh-TW", "結果：")])
def test_a_name_typed_in_a_gb18030_or_big5_terminal_reaches_the_server_as_typed(
    tmp_path: Path, encoding: str, lang: str, result: str
) -> None:
    """The line mode read what was typed as UTF-8 whatever the terminal's encoding: in a GB18030 terminal 李雷雷
    became six replacement characters (too long for the field, and never what the person wrote). It reads in
    standard input's encoding now, as the locale (or ``PYTHONIOENCODING``) sets it."""
    script = tmp_path / "inn.py"
    script.write_text(INN)
    typed = "1\n\n李雷雷\n\nq\n".encode(encoding)  # the tool, "answer now", the name, submit, quit
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "--lang", lang, "connect", "--ui", "lines", sys.executable, str(script)],
        input=typed, capture_output=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONIOENCODING": encoding, "LANG": "C.UTF-8", "LC_ALL": "", "LANGUAGE": ""},
    )  # fmt: skip
    assert result + '{"name": "李雷雷"}' in run.stdout.decode(encoding), run.stderr.decode(encoding, "replace")


def test_a_terminal_that_does_not_speak_utf8_gets_the_line_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The full screen reads keys as UTF-8: in a GB18030 terminal what a person types would not be what it read."""
    import io

    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    for encoding, screen in (("gb18030", False), ("big5", False), ("utf-8", True), ("UTF8", True)):
        stdin = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
        monkeypatch.setattr(stdin, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", stdin)
        assert (TerminalHandler()._screen is not None) is screen, encoding


def test_a_chinese_answer_in_ascii_escapes_arrives_intact_over_stdio(tmp_path: Path) -> None:
    """A client that writes JSON with \\u escapes (a character outside the BMP as a surrogate pair): the server
    reads 𠮷野家 as the three characters maxLength and minLength count, and what it writes back is UTF-8."""
    script = tmp_path / "inn.py"
    script.write_text(INN)
    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "客戶端", "version": "1"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "register", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["title"] == "臺北旅館"
        raw = proc.stdout.readline()
        assert "請填寫姓名（三個字）".encode() in raw  # written as UTF-8
        asked = json.loads(raw)
        assert asked["method"] == "elicitation/create"
        answer = {"action": "accept", "content": json.loads(ESCAPED)}
        proc.stdin.write(ascii_json({"jsonrpc": "2.0", "id": asked["id"], "result": answer}) + b"\n")
        proc.stdin.flush()
        done = json.loads(proc.stdout.readline())
        assert done["id"] == 2 and done["result"]["content"][0]["text"] == '{"name": "𠮷野家"}', done
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
        assert proc.stderr is not None
        errors = proc.stderr.read().decode()
        proc.stderr.close()
    assert "Traceback" not in errors, errors


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_chinese_answer_in_ascii_escapes_arrives_intact_over_http(anyio_backend: str) -> None:
    """The same over Streamable HTTP (2026-07-28: the answer comes back with the retried call), a body of ASCII
    escapes with a bare ``application/json`` type: 𠮷野家 is three characters, and the reply is UTF-8."""
    namespace: dict[str, Any] = {}
    exec(compile(INN, "inn", "exec"), namespace)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "register"}  # fmt: skip
    first = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "register", "_meta": meta}}
    async with serving(namespace["server"].http_app()) as url, httpx2.AsyncClient() as http:
        reply = await http.post(url, content=json.dumps(first).encode(), headers=headers)
        assert "請填寫姓名（三個字）".encode() in reply.content  # UTF-8, not escapes
        asked = reply.json()["result"]
        assert asked["resultType"] == "input_required"
        key = next(iter(asked["inputRequests"]))
        answers = {key: {"action": "accept", "content": json.loads(ESCAPED)}}
        params = {**first["params"], "inputResponses": answers, "requestState": asked["requestState"]}  # type: ignore[dict-item]
        retry = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        done = (await http.post(url, content=ascii_json(retry), headers=headers)).json()
    assert done["result"]["content"][0]["text"] == '{"name": "𠮷野家"}', done


# ---- emoji a joiner joins, flags: in a real terminal -------------------------------------------------------------


def test_joined_emoji_and_flags_take_the_cells_the_terminal_gives_them(tmux: Tmux) -> None:  # noqa: F811
    """A family of three emoji (joined by zero-width joiners) takes two cells in tmux, a flag two: prompt_toolkit
    counted six and four, so the banner's reverse video had a hole where its line ran short, the description broke
    a line early (and again where the terminal ended it), and the yes/no box's row ended four cells early."""
    command = f"cd {ROOT} && LANG=zh_CN.UTF-8 {sys.executable} tests/peers/emoji_form.py"
    tmux("new-session", "-d", "-s", "demo", "-x", "60", "-y", "30", command)
    family = "👨\u200d👩\u200d👧"
    tmux.wait_for("一家人的问题", "好吗", "< 检查 >")
    tmux.keys(f"家{family}x")
    shown = tmux.wait_for(f"› 家{family}x").split("\n")
    assert tmux("display", "-p", "-t", "demo", "#{cursor_x}").strip() == "8"  # the prompt's 3, 2 + 2 + 1 typed
    described = next(i for i, row in enumerate(shown) if "旗帜" in row)
    # as many as fit in 60 cells, and the rest on the next line only
    assert shown[described].rstrip().endswith("说明文字在这里继续写很多字以便换行看看对齐是否")
    assert shown[described + 1].rstrip() == " 正确"
    banner = tmux("capture-pane", "-p", "-e", "-t", "demo").split("\n")[0]
    assert banner.count("\x1b[") == 1, repr(banner)  # one reverse-video run, no hole in it
    assert banner.rstrip().endswith(f"🇨🇳 家庭{family}服务台 1 提问（服务器名称：desk）")


def test_a_line_breaks_between_emoji_never_inside_one_and_counts_the_cells_they_take() -> None:
    """``wrap`` (connect's tool menu, --help) and the full screen's line breaks: a family joined by zero-width
    joiners or a flag is never cut in two, and takes the two cells the terminal gives it, not six or four."""
    from elicitor.client._present import break_lines, cells, wrap

    family = "👨\u200d👩\u200d👧"
    text = f"我们一家{family}去度假{family}，带上🇨🇳国旗和🇹🇼旗"
    assert cells(family) == cells("🇨🇳") == 2 and cells(text) == 36
    lines = wrap(text, 12)
    assert lines == [f"我们一家{family}去", f"度假{family}，带上", "🇨🇳国旗和🇹🇼旗"]
    assert "".join(lines) == text
    assert break_lines(text, 12) == [len(lines[0]), len(lines[0]) + len(lines[1])]


@pytest.mark.anyio
async def test_forty_columns_in_chinese_break_the_banner_and_keys_where_a_person_reads_them(
    anyio_backend: str,
) -> None:
    """At 40 columns: the banner broke just after its opening bracket (before the server name) and the keys' bar
    between a key and what it does (Esc / 取消), each next line a cell left of the first; the date's words stood in
    ASCII brackets after a space in the review; a yes/no box had a scroll mark at the form's edge."""
    server = Implementation(name="booking-desk", version="1.0.0", title="Chez Elicitor booking desk")
    form = Form.from_schema({"type": "object", "properties": {
        "day": {"type": "string", "format": "date", "title": "日期"},
        "ok": {"type": "boolean", "title": "同意"},
    }})  # fmt: skip
    seen: list[str] = []
    async with screen_handler(Size(rows=24, columns=40), lang="zh") as (handler, screen):

        async def drive() -> None:
            await screen.shows("Esc 取消")
            seen.append(screen.text())
            await screen.type("2026-12-24", TAB, TAB, ENTER)
            await screen.shows("发送之前")
            seen.append(screen.text())
            await screen.type("\x1b")

        await answer(handler, ElicitationRequest("请回答", form, server), drive)
    lines = seen[0].splitlines()
    assert lines[:2] == [" Chez Elicitor booking desk 1.0.0 提问", " （服务器名称：booking-desk）"], seen[0]
    assert lines[-2:] == [" Tab / Shift-Tab 移动 · 空格键勾选 ·", " Enter 下一项或按下按钮 · Esc 取消"], seen[0]
    assert not [line for line in lines if "同意" in line and line.rstrip().endswith("^")], seen[0]
    assert " 日期：2026-12-24（2026年12月24日）" in seen[1].splitlines(), seen[1]


def test_a_line_may_break_after_a_full_width_comma_before_latin_text() -> None:
    """``--help`` at 40 columns cut 2025-11-25 after its second hyphen: after a full-width mark (、) a line may
    break, and a Latin word or date that follows it goes whole to the next line."""
    from elicitor.client._present import wrap

    assert wrap("auto（默认）、2026-07-28、2025-11-25 或 2025-06-18", 20) == [
        "auto（默认）、", "2026-07-28、", "2025-11-25 或", "2025-06-18",
    ]  # fmt: skip


@pytest.mark.anyio
async def test_the_demo_desk_asks_in_the_persons_language(anyio_backend: str) -> None:
    """``elicitor demo`` is elicitor's own server: a person reading Traditional Chinese met a desk that asked,
    described its tools and answered in English. The client hands the desk its language; the desk asks in it
    (its titles, choices, message and results), on the wire as any server's words."""
    from elicitor import ScriptedHandler

    handler = ScriptedHandler(["decline"])
    command = [sys.executable, "-m", "elicitor.demo", "server"]
    env = {**os.environ, "ELICITOR_DEMO_LANG": "zh_Hant_TW"}
    with anyio.fail_after(60):
        async with Client.stdio(command, env=env, elicitation=handler) as client:
            assert client.server_info is not None and client.server_info.title == "Chez Elicitor 訂位櫃檯"
            tools = {tool.name: tool.description for tool in await client.list_tools()}
            assert tools["book_table"] == "訂位：先向您詢問細節，再請您最後確認。"
            result = await client.call_tool("book_table")
    asked = handler.requests[0]
    assert asked.message == "我們來為您在 Chez Elicitor 訂位。"
    assert [f.label for f in asked.form.fields][:3] == ["用餐人數", "日期", "座位"]
    seating = asked.form.fields[2]
    assert isinstance(seating, EnumField) and [o.label for o in seating.options] == [
        "室內用餐區",
        "有暖爐的露臺",
        "吧檯",
    ]
    assert result.text == "未訂位：您拒絕了。"


def test_connects_own_lines_are_wrapped_to_the_terminal_as_a_person_reads_them(tmux: Tmux) -> None:  # noqa: F811
    """``elicitor demo`` at 70 columns in Traditional Chinese: the terminal cut "已透過 stdio 連線到 …" where it
    ended, so its full stop began the next line alone; connect wraps its own lines by cells, as its tool menu."""
    command = f"cd {ROOT} && LANG=zh_TW.UTF-8 BROWSER=true {sys.executable} -m elicitor demo"
    tmux("new-session", "-d", "-s", "demo", "-x", "70", "-y", "40", command)
    tmux.wait_for("用餐人數", timeout=60)
    tmux.keys("Escape")
    shown = tmux.wait_for("未訂位：已取消。", "要呼叫的工具", timeout=60).split("\n")
    assert not [row for row in shown if row.startswith("。")], shown
    connected = next(i for i, row in enumerate(shown) if row.startswith("已透過 stdio 連線到"))
    assert shown[connected : connected + 2] == [
        "已透過 stdio 連線到 Chez Elicitor 訂位櫃檯 1.0.0，協定版本",
        "2026-07-28。",
    ]


calendar_desk = Server("calendar-desk", version="1.0.0")


@calendar_desk.tool()
async def add_dinner(ctx: Context) -> str:
    link = await ctx.url_elicitation("连接您的日历", "https://calendar.example/connect/{elicitation_id}")
    if not link.completed:
        from elicitor import UrlElicitationRequired

        raise UrlElicitationRequired(link)
    return "added"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_refused_url_step_is_said_in_the_persons_language(anyio_backend: str, protocol: str) -> None:
    """The person declines the page a tool needs first: the call's error is elicitor's own sentence (written by
    the client on 2025-11-25, by the server on 2026-07-28), which connect said in English under a Chinese
    locale. It reads in their words now, the tool's name and the server's step as sent."""
    from elicitor import ScriptedHandler
    from elicitor._results import Saver, result_text

    handler = ScriptedHandler(["decline"], modes=frozenset({"form", "url"}))
    async with connected(calendar_desk, elicitation=handler, protocol=protocol) as client:
        result = await client.call_tool("add_dinner")
    assert result.is_error
    said = result_text(result, language("zh-TW"), Saver(None))
    assert said == "錯誤：工具 'add_dinner' 需要的一個步驟被拒絕或取消了：连接您的日历"
    english = "Error: Tool 'add_dinner' needs a step the person declined or cancelled: 连接您的日历"
    assert result_text(result, ENGLISH, Saver(None)) == english


writer_desk = Server("writer-desk", version="1.0.0")


@writer_desk.tool()
async def summarise(ctx: Context, pages: int) -> str:
    return str(await ctx.sample(f"Summarise {pages} pages", max_tokens=50))


@writer_desk.resource("memo://broken")
async def broken() -> str:
    raise RuntimeError("the disk at /srv/memo is full")


@pytest.mark.anyio
async def test_an_elicitor_servers_own_tool_errors_are_said_in_the_persons_language(anyio_backend: str) -> None:
    """Sentences elicitor's server writes into a tool's error (the client lacks a capability; the arguments do not
    fit) were shown in English under a Chinese locale: connect recognises them and says them in the person's
    words, the tool's name and the validator's detail as sent. English stays exactly what the server wrote."""
    from elicitor._results import Saver, result_text

    async with connected(writer_desk, protocol="2025-11-25") as client:
        missing = await client.call_tool("summarise", {"pages": 3})
        wrong = await client.call_tool("summarise", {"pages": "三"})
    assert missing.is_error and wrong.is_error
    assert result_text(missing, language("zh-TW"), Saver(None)) == (
        "錯誤：工具 'summarise' 需要用戶端不提供的能力：用戶端沒有宣告取樣（sampling）能力"
    )
    assert result_text(missing, ENGLISH, Saver(None)) == (
        "Error: Tool 'summarise' needs something the client does not offer: the client did not declare the sampling "
        "capability"
    )
    detail = wrong.content[0].text.split(": ", 1)[1]  # type: ignore[union-attr]  # the validator's, in English
    assert result_text(wrong, language("zh-CN"), Saver(None)) == f"错误：工具 'summarise' 的参数无效：{detail}"


@pytest.mark.anyio
async def test_an_elicitor_servers_json_rpc_errors_are_said_from_their_code_and_data(anyio_backend: str) -> None:
    """A server's JSON-RPC error read ``… (code -32021)`` in English whatever the person's language: connect makes
    the sentence on this side from what is structured in it (the capabilities ``data`` names, elicitor's own
    internal-error sentence and its reference) and says what a standard code means beside a server's own words."""
    from elicitor._connect import reason_of

    async with connected(writer_desk, protocol="2026-07-28") as client:
        with pytest.raises(JSONRPCError) as missing:
            await client.call_tool("summarise", {"pages": 3})
        with pytest.raises(JSONRPCError) as unknown:
            await client.call_tool("nope")
        with pytest.raises(JSONRPCError) as broke:
            await client.read_resource("memo://broken")
    zh = language("zh-CN")
    assert reason_of(missing.value, zh) == "服务器需要本客户端不提供的能力：sampling（错误码 -32021）"
    assert reason_of(unknown.value, zh) == "Invalid params: unknown tool 'nope'（错误码 -32602：参数无效）"
    reference = broke.value.data["reference"]  # type: ignore[index,call-overload]
    assert reason_of(broke.value, language("zh-TW")) == (
        f"伺服器內部出錯（參考編號 {reference}；詳情記在伺服器的日誌中）（錯誤碼 -32603）"
    )
    assert reason_of(broke.value, ENGLISH) == str(broke.value)  # the English is the server's, as it wrote it


def test_connect_says_a_servers_refusal_in_chinese() -> None:
    """The same through ``elicitor connect`` over stdio, as a person meets it: a tool that needs sampling."""
    run = connect_in("zh", ["test_missing_capability", "q"])
    assert run.returncode == 0, run.stderr
    said = "错误：工具 'test_missing_capability' 需要客户端不提供的能力：客户端没有声明采样（sampling）能力"
    assert said in run.stdout


@pytest.mark.parametrize(
    ("environ", "argv", "said"),
    [
        ({"LANG": "zh_CN.UTF-8"}, [], "{version} 版本的更新内容，摘自更新日志（只有英文版）："),
        ({"LANG": "zh_TW.UTF-8"}, [], "{version} 版本的更新內容，摘自更新日誌（只有英文版）："),
        ({"LANG": "zh_CN.UTF-8"}, ["--lang", "en"], None),
    ],
)  # fmt: skip
def test_version_says_in_the_persons_language_that_its_changelog_is_english(
    environ: dict[str, str], argv: list[str], said: str | None
) -> None:
    """``elicitor --version`` under a Chinese locale printed the English changelog straight after the version,
    with nothing in the person's words: a line in them now says what follows and that it is written in English.
    In English the entry follows the version as before."""
    from elicitor import __version__
    from elicitor._version import changes

    run = subprocess.run(
        [sys.executable, "-m", "elicitor", *argv, "--version"], capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    )  # fmt: skip
    notes = changes(__version__)
    assert run.returncode == 0 and notes is not None, run.stderr
    lines = run.stdout.split("\n")
    assert lines[:2] == [f"elicitor {__version__}", ""]
    if said is None:
        assert run.stdout == f"elicitor {__version__}\n\n{notes}\n"
    else:
        assert lines[2] == said.format(version=__version__) and run.stdout.endswith(f"\n{notes}\n")


@pytest.mark.anyio
async def test_a_length_refused_says_how_many_characters_it_counted(anyio_backend: str) -> None:
    """A length is counted in code points, as JSON Schema counts them: a family of three joined emoji is five, though
    a person sees one. "长度至多为 3 个字符" alone left them guessing why 一家👨‍👩‍👧 is too long; the message
    says the count, in their words, on the full screen as typed through an input method."""
    schema = {"type": "object", "properties": {"who": {"type": "string", "title": "称呼", "maxLength": 3}}}
    request = ElicitationRequest("请填写", Form.from_schema(schema), Implementation(name="inn", version="1"))
    seen: list[str] = []
    async with screen_handler(Size(rows=24, columns=80), lang="zh") as (handler, screen):

        async def drive() -> None:
            await screen.shows("称呼")
            await screen.type("一家\U0001f468\u200d\U0001f469\u200d\U0001f467")
            await screen.shows("✗ 长度至多为 3 个字符（现有 7 个）")
            seen.append(screen.text())
            await screen.type("\x1b")

        assert await answer(handler, request, drive) == Cancelled()
    assert "称呼" in seen[0]
    assert StringField(name="who", max_length=3).check("𠮷野家") == "𠮷野家"  # 𠮷 is one code point, two UTF-16 units


CRASH = """
import os

from elicitor import Server

server = Server("crash", "1.0", title="崩潰")


@server.tool()
async def die() -> str:
    os._exit(3)


if __name__ == "__main__":
    server.run()
"""


def test_connect_says_in_the_persons_language_why_a_connection_failed_on_its_side(tmp_path: Path) -> None:
    """The server's process ends during a call, or never completes the handshake: why is this side's own
    sentence, which connect wrote in English ("the connection closed before the peer answered") after its
    Chinese word for "Error"; now all of it is in the person's language."""
    (tmp_path / "crash.py").write_text(CRASH)
    environ = {**os.environ, "LANG": "zh_TW.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": ""}
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", sys.executable, str(tmp_path / "crash.py")],
        input="die\n", capture_output=True, text=True, timeout=120, cwd=ROOT, env=environ,
    )  # fmt: skip
    assert "錯誤：連線在對方回答之前就關閉了" in run.stderr, run.stderr
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", "--timeout", "2", *silent],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**environ, "LANG": "zh_CN.UTF-8"},
    )  # fmt: skip
    assert run.returncode == 1 and "：服务器未在 2 秒内完成握手。" in run.stderr, run.stderr


def first_line_of(command: list[str], environ: dict[str, str]) -> str:
    """The first line a long-running elicitor command writes on standard error about itself (one that begins with
    ``elicitor``: a server it starts shares that stream); the command is then stopped."""
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": "", **environ},
    )  # fmt: skip
    try:
        assert process.stderr is not None
        for _ in range(50):
            line = process.stderr.readline().decode()
            if line.startswith("elicitor") or not line:
                return line
        return ""
    finally:
        process.terminate()
        process.communicate(timeout=60)


@pytest.mark.parametrize(
    ("lang", "proxy", "dev_auth"),
    [
        ("zh_CN.UTF-8", "elicitor proxy：地址 http://127.0.0.1:{port}/mcp，转发至 ", "elicitor dev-auth：http://"),
        ("zh_TW.UTF-8", "elicitor proxy：位址 http://127.0.0.1:{port}/mcp，轉送至 ", "elicitor dev-auth：http://"),
        ("C.UTF-8", "elicitor proxy: at http://127.0.0.1:{port}/mcp, forwarding to ", "elicitor dev-auth: http://"),
    ],
)  # fmt: skip
def test_proxy_and_dev_auth_say_where_they_listen_with_the_colon_and_brackets_of_the_persons_language(
    lang: str, proxy: str, dev_auth: str
) -> None:
    """``elicitor proxy --listen`` and ``elicitor dev-auth`` began their first line with an ASCII colon and a space
    and the proxy ended its with ASCII brackets, in a Chinese line ("elicitor proxy: 地址 … (httptools, uvloop)"),
    where ``elicitor serve`` writes the full-width forms: they now write them too."""
    from .conftest import free_port

    port = free_port()
    server = [sys.executable, str(ROOT / "examples" / "everything_server.py")]
    command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", "--listen", f"127.0.0.1:{port}", *server]
    said = first_line_of(command, {"LANG": lang})
    assert said.startswith(proxy.format(port=port)), said
    assert said.rstrip("\n").endswith(")" if lang == "C.UTF-8" else "）"), said
    command = [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(free_port())]
    said = first_line_of(command, {"LANG": lang})
    assert said.startswith(dev_auth), said


@pytest.mark.anyio
async def test_a_list_of_choices_says_which_one_it_did_not_understand(anyio_backend: str) -> None:
    """Three choices typed as Chinese writes a list, one of them not on offer: the line mode said only "pick one of
    the choices shown", which left the person to find which of the three it meant. It names what it did not
    understand, in their words, and takes the list once that is gone."""
    form = Form.from_schema(
        {
            "type": "object",
            "properties": {
                "needs": {
                    "type": "array",
                    "title": "饮食需求",
                    "items": {"type": "string", "enum": ["素食", "坚果过敏"]},
                }
            },
        }
    )
    handler, shown = scripted_terminal(["", "素食、外星食物、坚果过敏", "素食、坚果过敏", ""], lang="zh")
    req = ElicitationRequest("请填写", form, Implementation(name="desk", version="1"))
    assert await handler(req) == Accepted({"needs": ["素食", "坚果过敏"]})
    assert "  不在显示的选项中：外星食物；请逐项输入编号或名称" in shown, shown


HUGE = """
from elicitor import Server

server = Server("huge", "1.0")


@server.tool()
async def dump() -> str:
    return "长" * (6 << 20)  # 18 MiB of UTF-8: over the 16 MiB a client takes by default


if __name__ == "__main__":
    server.run()
"""


def test_connect_says_a_dropped_answer_a_cancelled_task_and_an_unknown_outcome_in_the_persons_language(
    tmp_path: Path,
) -> None:
    """An answer over the client's size limit, a task the server cancelled, a call whose outcome is unknown:
    the exceptions say them in English (and keep what they are about in attributes), which connect showed after
    its Chinese "Error:". It makes the sentence from those attributes now, numbers in the person's forms."""
    from elicitor import OutcomeUnknown, TaskCancelled
    from elicitor._connect import reason_of

    (tmp_path / "huge.py").write_text(HUGE)
    run = subprocess.run(
        [sys.executable, "-m", "elicitor", "connect", "--ui", "lines", sys.executable, str(tmp_path / "huge.py")],
        input="dump\nq\n", capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": ""},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "，超过了 16,777,216 字节的上限（max_message_size）：已被丢弃" in run.stderr, run.stderr[-2000:]
    zh_tw = language("zh-TW")
    assert reason_of(TaskCancelled("t1", "operator stopped it"), zh_tw) == "任務 t1 已被取消：operator stopped it"
    from elicitor._sentences import SESSION_ENDED

    unknown = OutcomeUnknown("tools/call", str(SESSION_ENDED))
    assert reason_of(unknown, zh_tw) == (
        "tools/call 的結果不明：伺服器的工作階段在它執行期間結束了（它所在的副本可能已停止）；伺服器可能已經執行了它，"
        "因此沒有再次傳送"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_why_signing_in_failed_is_said_in_the_persons_language(anyio_backend: str, tmp_path: Path) -> None:
    """A protected server (elicitor serve behind elicitor dev-auth), a person who never comes back from the
    sign-in page: connect framed the failure in Chinese but said why in English ("no sign-in within 1 s (the
    browser never came back)"). The reasons a person meets when signing in are in their words now; what the
    authorization server sent (its error code and description) as it came."""
    from elicitor._connect import reason_of
    from elicitor.client._local import AUTH_REFUSED_WHY, SIGNING_IN_FAILED, in_language, said
    from elicitor.client.auth import LoopbackAuthorizer, OAuth

    from .replicas import free_port
    from .test_dev_auth import started

    auth_port, mcp_port = free_port(), free_port()
    issuer, url = f"http://127.0.0.1:{auth_port}", f"http://127.0.0.1:{mcp_port}/mcp"
    dev_auth = [sys.executable, "-m", "elicitor", "dev-auth", "--port", str(auth_port)]
    serve = [sys.executable, "-m", "elicitor", "serve", "tests.peers.cli_server:server", "--port", str(mcp_port),
             "--auth-issuer", issuer]  # fmt: skip
    with started(dev_auth, auth_port, tmp_path / "auth.log"), started(serve, mcp_port, tmp_path / "serve.log"):
        auth = OAuth(LoopbackAuthorizer(write=lambda line: None, open_browser=False, timeout=1))
        with anyio.fail_after(120), pytest.raises(JSONRPCError) as failed:
            async with Client.http(url, auth=auth):
                pass
    said_zh = reason_of(failed.value, language("zh-CN"))
    assert "登录服务器失败：1 秒内没有完成登录（浏览器一直没有返回）" in said_zh, said_zh
    refused = said(SIGNING_IN_FAILED, detail=said(AUTH_REFUSED_WHY, error="access_denied", detail="User said no"))
    assert in_language(refused, language("zh-TW")) == "登入伺服器失敗：授權被拒絕：access_denied（User said no）"


def test_a_date_typed_as_chinese_writes_it_is_read_in_a_real_terminal(tmux: Tmux) -> None:  # noqa: F811
    """The date field's hint gives today in two forms, 2026-11-27 and 2026年11月27日: a person who typed a date in
    the second (full-width digits from an input method too) was told "应为 YYYY-MM-DD 格式的日期". It is read as
    the date it names and sent as YYYY-MM-DD; the review shows both, in the demo, on the full screen."""
    command = f"cd {ROOT} && LANG=zh_CN.UTF-8 BROWSER=true {sys.executable} -m elicitor demo; sleep 60"
    tmux("new-session", "-d", "-s", "demo", "-x", "120", "-y", "50", command)
    tmux.wait_for("用餐人数 *", "日期 *", "饮食需求 *", timeout=60)
    tmux.keys("3", "Tab", "２０２６年１２月２４日", "Tab", "Down", "Down", "Space", "Tab", "ada@example.com", "Tab")
    tmux.keys("Space", "Down", "Down", "Space", "Tab", "Tab", "Enter")
    shown = tmux.wait_for("日期：2026-12-24（2026年12月24日）", timeout=60)
    assert "应为 YYYY-MM-DD 格式的日期" not in shown


menu_desk = Server("menu-desk", version="1.0.0")


@menu_desk.tool()
async def pick(ctx: Context) -> str:
    form = {"type": "object", "properties": {"diet": {"type": "array", "items": {"type": "string", "enum": ["素"]}}}}
    return str(await ctx.elicit("选择", Form.from_schema(form)))


@pytest.mark.anyio
async def test_a_form_the_clients_revision_cannot_carry_is_said_in_the_persons_language(anyio_backend: str) -> None:
    """A 2025-06-18 client (no multi-select fields there): the tool's error named why in English after the Chinese
    frame elicitor put around it. The reason is one of elicitor's own sentences too now; the field's name as sent."""
    from elicitor import ScriptedHandler
    from elicitor._results import Saver, result_text

    async with connected(menu_desk, elicitation=ScriptedHandler([]), protocol="2025-06-18") as client:
        result = await client.call_tool("pick")
    assert result_text(result, language("zh-CN"), Saver(None)) == (
        "错误：工具 'pick' 需要客户端不提供的能力：多选字段（diet）需要协议版本 2025-11-25 或更新版本；"
        "客户端使用的是 2025-06-18"
    )


def test_a_passing_outage_is_said_in_the_persons_language() -> None:
    """A server whose shared state was away for a moment answers with elicitor's retryable -32603: its sentence
    (retry in how many seconds, a reference for the log) reads in the person's words, the reference as sent."""
    from elicitor import TemporarilyUnavailable
    from elicitor._connect import reason_of
    from elicitor.session._errors import transient_error

    error = transient_error(TemporarilyUnavailable("redis at 10.0.0.5 is away", retry_after=2), "tools/call")
    reference = error.data["reference"]  # type: ignore[index,call-overload]
    assert error.retryable and "10.0.0.5" not in error.message
    assert reason_of(error, language("zh-TW")) == (
        f"暫時無法使用：伺服器依賴的一項服務短暫中斷；請在 2 秒後重試（參考編號 {reference}）（錯誤碼 -32603）"
    )
