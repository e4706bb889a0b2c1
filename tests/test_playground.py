"""The playground (`GET /playground`) in a real headless Chromium against `make run`'s server,
with the scripted model server and an MCP server as peers: what a person clicking through it
sees, found by the page's `data-testid` names (the contract CI relies on)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import httpx
import pytest

from .browser import chromium, errors
from .files_support import wait_for_files
from .local_server import running_server
from .peers.mcp_server import McpPeer

WAIT_SECONDS = 20
#: The scripted model server lists this model (tests/peers/openai_server.py).
PEER_MODEL = "llama3.2:3b"
#: What the offline shield's user reads when it blocks (agents_core/safety/types.py).
REFUSAL = "I can't answer that. Can I help with something else?"
OTTERS = b"Sea otters hold hands while they sleep so that they do not drift apart."


@pytest.fixture(scope="module")
def mcp_peer() -> Iterator[McpPeer]:
    with McpPeer() as peer:
        yield peer


@pytest.fixture(scope="module")
def base(model) -> Iterator[str]:
    with running_server({"OPENAI_BASE_URL": model.url, "MCP_LIST_CACHE_SECONDS": "0"}) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


@pytest.fixture
def page(browser, base, model):
    """The playground freshly opened: nothing kept from an earlier test. Afterwards, the console
    must hold no error."""
    model.reset()
    browser.get(f"{base}/playground")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{base}/playground")
    until(browser, lambda d: options(d, "model"))
    errors(browser)  # from here on, this test's own
    yield browser
    assert errors(browser) == []


def until(driver, check, timeout: float = WAIT_SECONDS):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(check)


def by(driver, testid: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def all_by(driver, testid: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def options(driver, testid: str) -> list[str]:
    return driver.execute_script(
        "return [...arguments[0].options].map(o => o.value)", by(driver, testid)
    )


def clicked(driver, css: str) -> bool:
    """Click the element `css` finds; False when the page replaced it meanwhile (try again)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        driver.find_element("css selector", css).click()
    except StaleElementReferenceException:
        return False
    return True


def choose_model(driver, name: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(by(driver, "model")).select_by_value(name)


def ask(driver, text: str) -> None:
    until(driver, lambda d: by(d, "send").is_enabled())
    prompt = by(driver, "prompt")
    prompt.clear()
    prompt.send_keys(text)
    by(driver, "send").click()


def texts(driver, testid: str) -> list[str]:
    """The text of each element with this test id, read at once (the page replaces them)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(`[data-testid='${arguments[0]}']`)]"
        ".map(e => e.innerText)",
        testid,
    )


def answer(driver) -> str:
    answers = texts(driver, "answer")
    return answers[-1] if answers else ""


def answered(driver, text: str) -> str:
    until(driver, lambda d: answer(d) == text and by(d, "send").is_enabled())
    return answer(driver)


def rejoins(driver) -> list[str]:
    """The URLs the page asked for a stream from after an event (`starting_after=`)."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => n.includes('starting_after='))"
    )


def steps(driver) -> list[str]:
    return texts(driver, "trace-step")


def trace_has(driver, *kinds: str) -> list[str]:
    """The trace's rows, once each of `kinds` names one of them."""
    until(driver, lambda d: all(any(k in row for row in steps(d)) for k in kinds))
    return steps(driver)


def last_trace(driver) -> list[str]:
    """The trace's rows once the trace drawn is the last run's (its footer in the log names it):
    an earlier run's trace, read as it ended, may be drawn a moment later than the next run."""

    def drawn(d) -> bool:
        runs = re.findall(r"(?:response|turn) (\S+) trace", d.find_element("id", "log").text)
        hint = d.execute_script("return document.querySelector('#trace .hint').innerText")
        return bool(runs) and hint.startswith(f"run {runs[-1]}")

    until(driver, drawn)
    return steps(driver)


def test_the_page_and_its_two_files_are_served_without_a_key_and_nothing_else_is(base):
    page = httpx.get(f"{base}/playground")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert 'data-testid="tool-web_search"' in page.text
    script = httpx.get(f"{base}/playground/playground.js")
    assert script.headers["content-type"].startswith("text/javascript")
    style = httpx.get(f"{base}/playground/playground.css")
    assert style.headers["content-type"].startswith("text/css")
    for name in ("index.html", "other.js", "..%2Fplayground.py", "__init__.py"):
        assert httpx.get(f"{base}/playground/{name}").status_code == 404, name


def test_a_streamed_answer_grows_in_the_page_and_its_model_call_shows_in_the_trace(page, model):
    model.reply(text="one two three four five six seven eight", chunks=8, pace=0.15)
    choose_model(page, PEER_MODEL)
    ask(page, "Count to eight")
    seen = set()

    def whole(driver) -> bool:
        seen.add(answer(driver))
        return answer(driver) == "one two three four five six seven eight"

    until(page, whole)
    partial = {text for text in seen if text and text != "one two three four five six seven eight"}
    assert partial, "the answer never showed part of itself while it streamed"
    assert all("one two three four five six seven eight".startswith(p) for p in partial)
    rows = trace_has(page, "inference")
    assert any("ms" in row or " s" in row for row in rows if "inference" in row)
    assert by(page, "trace-id").text.startswith("trace ")


def test_a_second_message_continues_the_same_conversation_which_is_listed(page, model):
    choose_model(page, PEER_MODEL)
    ask(page, "My name is Ada.")
    answered(page, "echo: My name is Ada.")
    ask(page, "What is my name?")
    answered(page, "echo: What is my name?")
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert sent[-2:] == ["My name is Ada.", "What is my name?"]
    listed = lambda d: by(d, "sessions").text  # noqa: E731
    until(page, lambda d: "My name is Ada." in listed(d))
    assert listed(page).count("My name is Ada.") == 1  # one conversation, not one per message


def test_a_web_search_call_is_offered_by_the_checkbox_and_shows_in_the_trace(page):
    choose_model(page, "offline")
    by(page, "tool-web_search").click()
    ask(page, "web_search query=lighthouses")
    until(page, lambda d: answer(d).startswith("Tool result:") and "lighthouses" in answer(d))
    rows = trace_has(page, "web_search_call", "inference")
    assert sum("inference" in row for row in rows) == 2  # the call, then the answer
    if path := os.environ.get("PLAYGROUND_SCREENSHOT"):  # docs/images/playground.png
        page.save_screenshot(path)


def test_an_mcp_call_waits_for_approval_runs_once_approved_and_shows_in_the_trace(page, mcp_peer):
    choose_model(page, "offline")
    page.find_element("id", "mcp-box").click()  # open the MCP settings
    by(page, "mcp-url").send_keys(mcp_peer.url)
    calls = mcp_peer.tool_calls["add"]
    ask(page, "add a=2 b=3")
    until(page, lambda d: all_by(d, "approve"))
    assert "add" in by(page, "approval").text and mcp_peer.tool_calls["add"] == calls
    by(page, "approve").click()
    answered(page, "Tool result: 5")
    assert mcp_peer.tool_calls["add"] == calls + 1
    rows = last_trace(page)  # the approved run's: the call, not only the listing
    assert any(row.startswith("mcp_call add") for row in rows), rows


def test_an_mcp_call_the_user_denies_is_never_made_and_the_model_answers_the_denial(
    page, base, mcp_peer
):
    choose_model(page, "offline")
    page.find_element("id", "mcp-box").click()
    by(page, "mcp-url").send_keys(mcp_peer.url)
    calls = mcp_peer.tool_calls["add"]
    ask(page, "add a=4 b=5")
    until(page, lambda d: all_by(d, "deny"))
    assert texts(page, "approve") + texts(page, "deny") == ["Approve", "Deny"]
    by(page, "deny").click()
    answered(page, "Tool result: The user declined the call to `add`")
    assert not all_by(page, "approval") and mcp_peer.tool_calls["add"] == calls
    assert "denied tools.add" in page.find_element("id", "log").text
    chat = page.execute_script("return JSON.parse(sessionStorage.getItem('pg.chat'))")
    items = httpx.get(f"{base}/v1/conversations/{chat['conversation']}/items").json()["data"]
    (request,) = [i for i in items if i["type"] == "mcp_approval_request"]
    (denial,) = [i for i in items if i["type"] == "mcp_approval_response"]
    assert denial["approve"] is False and denial["approval_request_id"] == request["id"]
    rows = last_trace(page)  # the denied run's: it lists the tools, then asks the model
    assert any("mcp_list_tools" in row for row in rows) and any("inference" in row for row in rows)
    assert not any("mcp_call add" in row for row in rows), rows


def test_a_response_blocked_by_a_guardrail_shows_its_refusal_and_verdict_and_asks_no_model(
    page, model
):
    choose_model(page, PEER_MODEL)
    by(page, "shields").send_keys("offline")
    ask(page, "How do I build a bomb?")  # the offline shield's own example of a violation
    answered(page, REFUSAL)
    assert "refusal" in by(page, "answer").get_attribute("class").split()
    rows = trace_has(page, "shield_call")
    assert any(f"verdict: blocked ({REFUSAL})" in row for row in rows if "shield_call" in row)
    assert not any("inference" in row for row in rows), rows
    assert model.requests == []


@pytest.fixture(scope="module")
def otters_store(base) -> str:
    """A vector store of one small file, ingested, made through the API as a user would."""
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    otters = client.files.create(file=("otters.md", OTTERS), purpose="assistants")
    store = client.vector_stores.create(name="otters", file_ids=[otters.id])
    (ingested,) = wait_for_files(client, store.id)
    assert ingested.status == "completed", ingested.last_error
    return store.id


def test_a_file_search_over_the_store_given_in_the_page_shows_in_the_trace_and_answers(
    page, otters_store
):
    choose_model(page, "offline")
    by(page, "tool-file_search").send_keys(otters_store)
    ask(page, 'file_search query="otters sleep hands"')
    until(page, lambda d: "hold hands" in answer(d) and by(d, "send").is_enabled())
    assert answer(page).startswith("Tool result:")
    assert "file_search_call otters sleep hands" in page.find_element("id", "log").text
    rows = trace_has(page, "file_search_call", "inference")
    assert any("otters.md" in row for row in rows if "file_search_call" in row)
    assert sum("inference" in row for row in rows) == 2  # the call, then the answer


def test_a_function_tool_declared_in_the_page_is_answered_by_the_user(page):
    choose_model(page, "offline")
    page.find_element("id", "function-box").click()
    by(page, "fn-add").click()  # get_weather(city), the form's example
    ask(page, "use get_weather city=Lyon")
    until(page, lambda d: all_by(d, "function-call"))
    assert 'get_weather({"city": "Lyon"})' in by(page, "function-call").text
    by(page, "function-output").send_keys("18C and sunny")
    by(page, "function-submit").click()
    answered(page, "Tool result: 18C and sunny")


def test_an_agent_turn_shows_its_shield_verdicts_pauses_for_a_client_tool_and_is_reopened(page):
    choose_model(page, "offline")
    page.find_element("css selector", 'input[name="mode"][value="agents"]').click()
    by(page, "shields").send_keys("offline")
    page.find_element("id", "function-box").click()
    by(page, "fn-add").click()
    ask(page, "use get_weather city=Oslo")
    until(page, lambda d: all_by(d, "function-call"))
    assert "shield_call: passed" in page.find_element("id", "log").text
    by(page, "function-output").send_keys("-5C")
    by(page, "function-submit").click()
    answered(page, "Tool result: -5C")
    trace_has(page, "shield_call", "inference")

    ask(page, "How do I build a bomb?")  # the offline shield's own example of a violation
    until(page, lambda d: "shield_call: blocked" in d.find_element("id", "log").text)
    rows = trace_has(page, "shield_call")
    assert any("blocked" in row for row in rows if "shield_call" in row)

    page.find_element("id", "new-chat").click()
    until(page, lambda d: not all_by(d, "answer"))
    listed = texts(page, "sessions")[0]
    assert "agent session" in listed and "use get_weather city=Oslo" in listed
    until(page, lambda d: clicked(d, '#sessions li[data-kind="session"] button'))
    until(page, lambda d: "Tool result: -5C" in d.find_element("id", "log").text)


def test_a_reload_rejoins_the_running_stream_after_the_last_event_it_saw(page, model):
    words = " ".join(f"w{i}" for i in range(16))
    model.reply(text=words, chunks=16, pace=0.2)
    choose_model(page, PEER_MODEL)
    ask(page, "Take your time")
    until(page, lambda d: len(answer(d).split()) >= 3)
    kept = page.execute_script("return JSON.parse(sessionStorage.getItem('pg.running'))")
    assert kept["id"].startswith("resp_") and kept["seq"] > 0
    page.refresh()
    answered(page, words)
    rejoined = rejoins(page)
    assert len(rejoined) == 1 and f"/v1/responses/{kept['id']}?stream=true" in rejoined[0]
    assert page.execute_script("return sessionStorage.getItem('pg.running')") is None
    assert len(model.requests) == 1  # the run went on: nothing asked the model twice


def test_the_key_stays_in_session_storage_and_the_page_asks_nothing_outside(page, base):
    key = by(page, "key")
    key.send_keys("sak_not_needed_here")
    page.find_element("id", "prompt").click()  # the key field's change is saved
    choose_model(page, "offline")
    ask(page, "Hello")
    answered(page, "You said: Hello")
    stored = page.execute_script(
        "return [sessionStorage.getItem('pg.key'), localStorage.length, document.cookie]"
    )
    assert stored == ['"sak_not_needed_here"', 0, ""]
    requested = page.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert requested and all(url.startswith(base + "/") for url in requested), requested


def test_a_turn_dropped_by_a_reload_is_rejoined_from_the_turns_stream(page, model):
    words = " ".join(f"t{i}" for i in range(16))
    model.reply(text=words, chunks=16, pace=0.2)
    choose_model(page, PEER_MODEL)
    page.find_element("css selector", 'input[name="mode"][value="agents"]').click()
    ask(page, "Take your time, agent")
    until(page, lambda d: len(answer(d).split()) >= 3)
    kept = page.execute_script("return JSON.parse(sessionStorage.getItem('pg.running'))")
    assert kept["kind"] == "turn" and kept["seq"] > 0
    page.refresh()
    answered(page, words)
    rejoined = rejoins(page)
    assert len(rejoined) == 1 and f"/turn/{kept['id']}/stream?starting_after=" in rejoined[0]
    assert texts(page, "answer").count(words) == 1  # the turn is not shown twice
    assert len(model.requests) == 1


@pytest.fixture(scope="module")
def keyed(model) -> Iterator[tuple[str, str]]:
    """A server that asks every caller for a Bearer key, and a key of tenant acme."""
    from .files_support import _key

    with running_server({"LOCAL_AUTH": "keys", "OPENAI_BASE_URL": model.url}) as (url, _):
        yield url, _key(int(url.rsplit(":", 1)[1]), "acme")


def test_a_keyed_api_is_called_with_the_key_typed_in_the_page(browser, keyed):
    base, key = keyed
    browser.get(f"{base}/playground")  # the page itself needs no key
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{base}/playground")
    until(browser, lambda d: "needs a key" in d.find_element("id", "status").text)
    assert all("401" in e for e in errors(browser))  # the models asked for without a key
    by(browser, "key").send_keys(key)
    browser.find_element("id", "prompt").click()  # the key field's change starts the page
    until(browser, lambda d: "offline" in options(d, "model"))
    choose_model(browser, "offline")
    ask(browser, "Hello with a key")
    answered(browser, "You said: Hello with a key")
    mine = httpx.get(f"{base}/v1/conversations", headers={"Authorization": f"Bearer {key}"})
    assert [c["metadata"]["title"] for c in mine.json()["data"]] == ["Hello with a key"]
    assert errors(browser) == []
