"""The playground at / and the API description at /docs and /openapi.json: their headers, and the
playground driven in headless Chromium (Debian's chromium + chromium-driver, PyPI selenium):
load it, pick the model, send a message, read the streamed answer and its TTFT and tokens/s.

Screenshots go to $INFLIGHT_TEST_ARTIFACTS (default build/test-artifacts/). The browser tests
skip, saying why, when Chromium, its driver or selenium is missing."""

import base64
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import requests

from conftest import ROOT, SERVED_NAME, TIMEOUT, ServerProcess

ARTIFACTS = Path(os.environ.get("INFLIGHT_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
API_KEY = "pl4yground-key"


def test_pages_are_html_with_a_strict_policy(base_url):
    for path in ["/", "/docs"]:
        r = requests.get(base_url + path, timeout=30)
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert r.headers["x-content-type-options"] == "nosniff"
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp
        assert "unsafe" not in csp
        # The inline script and style are allowed by their hashes, and nothing else is.
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        for tag, directive in [("script", "script-src"), ("style", "style-src")]:
            blocks = re.findall(f"<{tag}>(.*?)</{tag}>", r.text, re.S)
            assert len(blocks) == 1
            digest = base64.b64encode(hashlib.sha256(blocks[0].encode()).digest()).decode()
            assert directives[directive] == f"'sha256-{digest}'"
        # No external asset: nothing is loaded from another origin.
        assert "http://" not in r.text and "https://" not in r.text and "//cdn" not in r.text
        head = requests.head(base_url + path, timeout=30)
        assert head.status_code == 200 and head.text == ""
    assert requests.post(base_url + "/docs", json={}, timeout=30).status_code == 405


def test_openapi_lists_the_routes(base_url):
    r = requests.get(base_url + "/openapi.json", timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["openapi"].startswith("3.1.")
    for path, method in [("/v1/chat/completions", "post"), ("/v1/completions", "post"),
                         ("/v1/models", "get"), ("/generate_stream", "post"), ("/", "get"),
                         ("/docs", "get"), ("/openapi.json", "get"), ("/metrics", "get")]:
        assert method in doc["paths"][path], (path, method)
    assert doc["info"]["version"] == requests.get(base_url + "/version").json()["version"]
    # Every described operation exists on the live server (an empty body is a 400, not 404/405).
    for path, item in doc["paths"].items():
        for method in item:
            url = base_url + path.replace("{model}", SERVED_NAME).replace("{version}", "1")
            r = requests.request(method.upper(), url, json={} if method == "post" else None,
                                 timeout=30)
            assert r.status_code not in (404, 405), (method, path, r.status_code)


@pytest.fixture(scope="module")
def keyed_server():
    s = ServerProcess(["--api-key", API_KEY])
    s.wait_ready()
    yield s
    assert s.stop() == 0


def test_pages_need_no_key(keyed_server):
    for path in ["/", "/docs", "/openapi.json"]:
        assert requests.get(keyed_server.url + path, timeout=30).status_code == 200, path
    assert requests.get(keyed_server.url + "/v1/models", timeout=30).status_code == 401


# ---- in the browser --------------------------------------------------------------------------

def chromium_paths():
    """(browser, driver) paths, or skips saying what is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("skipped: selenium not installed (scripts/install_deps.sh)")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("skipped: chromium and chromium-driver not installed (scripts/install_deps.sh)")
    return browser, driver


@pytest.fixture(scope="module")
def browser():
    browser_path, driver_path = chromium_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.TemporaryDirectory(prefix="inflight-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser_path
    # Headless, and as root in a container: no sandbox, no /dev/shm (often 64 MiB there).
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", f"--user-data-dir={profile.name}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    profile.cleanup()


def screenshot(driver, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))


def assert_no_policy_violation(driver):
    """The console holds no Content-Security-Policy report (read once: the log empties)."""
    messages = [e["message"] for e in driver.get_log("browser")]
    assert not [m for m in messages if "Content Security Policy" in m], messages


def wait_for(driver, condition, timeout=TIMEOUT):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d))


def page_state(driver):
    return driver.find_element("tag name", "body").get_attribute("data-state")


def models_loaded(driver):
    return driver.find_element("id", "model").get_attribute("data-loaded")


def set_field(driver, field_id, value):
    el = driver.find_element("id", field_id)
    el.clear()
    el.send_keys(str(value))


def open_playground(driver, url):
    driver.get(url + "/")
    driver.execute_script("localStorage.clear()")
    driver.get(url + "/")
    wait_for(driver, lambda d: models_loaded(d) is not None)


def chat(driver, message, max_tokens=16, **fields):
    """Sends `message` with greedy sampling; returns the final page state."""
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element("id", "model")).select_by_value(SERVED_NAME)
    set_field(driver, "temperature", 0)
    set_field(driver, "max-tokens", max_tokens)
    for field_id, value in fields.items():
        set_field(driver, field_id, value)
    set_field(driver, "prompt", message)
    driver.find_element("id", "send").click()
    return wait_for(driver, lambda d: page_state(d) not in ("idle", "streaming") and page_state(d))


def answers(driver):
    return [e.text for e in driver.find_elements("css selector", "#log .msg.assistant .text")]


def test_playground_streams_an_answer(browser, server):
    open_playground(browser, server.url)
    assert models_loaded(browser) == "true"
    options = [o.get_attribute("value")
               for o in browser.find_elements("css selector", "#model option")]
    assert options == [SERVED_NAME]
    set_field(browser, "system", "You are a concise assistant.")
    state = chat(browser, "What is the capital of France?", max_tokens=24, seed=1)
    screenshot(browser, "playground.png")
    assert state == "done", browser.find_element("id", "error").text
    [answer] = answers(browser)
    assert answer.strip()
    stats = browser.find_element("id", "stats").text
    assert "TTFT" in stats and "tokens/s" in stats, stats
    assert float(browser.find_element("id", "stats").get_attribute("data-ttft")) > 0
    assert not browser.find_element("id", "error").is_displayed()
    assert_no_policy_violation(browser)

    # A second turn carries the first: the conversation grows, the answer streams again.
    assert chat(browser, "And of Germany?") == "done"
    assert len(answers(browser)) == 2 and answers(browser)[1].strip()

    # Narrow window: the settings fold above the chat and the composer stays usable.
    browser.set_window_size(420, 860)
    wait_for(browser, lambda d: d.find_element("id", "settings").get_attribute("open") is None)
    screenshot(browser, "playground-narrow.png")
    assert browser.find_element("id", "send").is_displayed()
    assert browser.find_element("id", "prompt").is_displayed()
    browser.set_window_size(1280, 900)
    wait_for(browser, lambda d: d.find_element("id", "settings").get_attribute("open") is not None)


def test_playground_shows_api_errors(browser, server):
    open_playground(browser, server.url)
    assert chat(browser, "Hello", **{"top-p": 0}) == "error"
    error = browser.find_element("id", "error")
    assert error.is_displayed() and "HTTP 400" in error.text and "top_p" in error.text


def test_playground_stop_button(browser, server):
    open_playground(browser, server.url)
    from selenium.webdriver.support.ui import Select
    Select(browser.find_element("id", "model")).select_by_value(SERVED_NAME)
    set_field(browser, "max-tokens", 400)
    set_field(browser, "prompt", "Write a long story about a lighthouse keeper.")
    browser.find_element("id", "send").click()
    wait_for(browser, lambda d: page_state(d) == "streaming" and any(a.strip() for a in answers(d)))
    browser.find_element("id", "stop").click()
    wait_for(browser, lambda d: page_state(d) != "streaming")
    assert page_state(browser) == "stopped"
    assert answers(browser)[0].strip()
    assert not browser.find_element("id", "stop").is_enabled()
    # A new conversation starts empty and answers again.
    browser.find_element("id", "clear").click()
    assert page_state(browser) == "idle" and answers(browser) == []
    assert chat(browser, "Hello") == "done"
    assert len(answers(browser)) == 1 and answers(browser)[0].strip()


def test_playground_with_api_key(browser, keyed_server):
    open_playground(browser, keyed_server.url)
    # Without the key the model list is refused, and the page says so.
    assert models_loaded(browser) == "false"
    assert "401" in browser.find_element("id", "error").text
    key = browser.find_element("id", "api-key")
    key.send_keys(API_KEY)
    browser.find_element("id", "system").click()  # leaving the field stores the key
    wait_for(browser, lambda d: models_loaded(d) == "true")
    assert chat(browser, "Say hello.") == "done", browser.find_element("id", "error").text
    assert answers(browser)[0].strip()
    screenshot(browser, "playground-api-key.png")
    # The key is kept in localStorage for the next visit.
    browser.get(keyed_server.url + "/")
    wait_for(browser, lambda d: models_loaded(d) == "true")
    assert browser.find_element("id", "api-key").get_attribute("value") == API_KEY


def test_docs_page_lists_every_route(browser, server):
    browser.get(server.url + "/docs")
    routes = browser.find_element("id", "routes")
    wait_for(browser, lambda d: routes.get_attribute("data-state") != "loading")
    assert routes.get_attribute("data-state") == "done"
    doc = requests.get(server.url + "/openapi.json", timeout=30).json()
    shown = {(s.find_element("css selector", ".method").text,
              s.find_element("css selector", ".path").text)
             for s in routes.find_elements("css selector", "summary")}
    want = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert shown == want
    assert_no_policy_violation(browser)
    screenshot(browser, "docs.png")
