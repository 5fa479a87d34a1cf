"""Drives Talon's web dashboard (`talon serve`'s `GET /`) in a real headless Chromium with
Playwright, as a person would: logs in with the token, opens the pages, clicks, and prints what
it saw as one JSON report on stdout.

Usage: dashboard.py BASE_URL TOKEN SCREENSHOT_DIR CHROMIUM STEPS_JSON

STEPS_JSON (every key optional), done in this order:
  {"user": ID,                  view as this user (approvals, questions, events are per user)
   "session": KEY,              expect the session in the list and open its transcript
   "transcript_contains": TEXT, wait until the transcript shows TEXT
   "approve": true,             wait for a pending approval and allow it
   "expect_event": TYPE,        then wait for a live event row of TYPE (e.g. tool_finished)
   "agent": KEY}                expect the agent in the list and open it

The report: {"logged_in", "token_required", "sessions": [keys], "transcript": text of
#transcript, "pending_count", "approved": id or null, "events": [types], "agents": [keys],
"http_errors": [every response >= 400], "console_errors": [...]}. console_errors holds the
page's console errors (a CSP violation among them), uncaught exceptions, failed requests, and
responses other than the expected 401 (login probe) and 404 (optional features absent).
Screenshots: login.png, sessions.png, approvals.png, events.png, agents.png, mcp.png (and
failure.png when a step fails). Each wait gives up after 45 s (a loaded CI machine runs several gateways beside it): the script then prints the
report with an "error" and exits 1.
"""

import json
import os
import sys

TIMEOUT_MS = 45_000
USAGE = "usage: dashboard.py BASE_URL TOKEN SCREENSHOT_DIR CHROMIUM STEPS_JSON"

# Reported from inside the page: Chromium also logs violations itself, this makes sure.
CSP_PROBE = """
document.addEventListener('securitypolicyviolation', (e) => {
  console.error('CSP violation: ' + e.violatedDirective + ' blocked ' +
    (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber);
});
"""


class Failure(Exception):
    pass


def css_string(value):
    """`value` as a CSS string literal, for attribute selectors of raw server values."""
    out = []
    for ch in value:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\%x " % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def attr_selector(name, value):
    return "[%s=%s]" % (name, css_string(value))


def main():
    if len(sys.argv) != 6:
        print(USAGE, file=sys.stderr)
        return 2
    base_url, token, shots, chromium, steps_json = sys.argv[1:]
    base_url = base_url.rstrip("/")
    steps = json.loads(steps_json) if steps_json.strip() else {}
    os.makedirs(shots, exist_ok=True)

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    report = {
        "logged_in": False,
        "token_required": None,
        "sessions": [],
        "transcript": None,
        "pending_count": None,
        "approved": None,
        "events": [],
        "agents": [],
        "http_errors": [],
        "console_errors": [],
    }
    errors = report["console_errors"]

    def wait(what, action):
        try:
            return action()
        except PlaywrightTimeout as e:
            raise Failure("timed out after %d s waiting %s" % (TIMEOUT_MS // 1000, what)) from e

    def shot(page, name):
        page.screenshot(path=os.path.join(shots, name), full_page=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = None
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.add_init_script(CSP_PROBE)
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            watch(page, report, errors)

            # Login.
            page.goto(base_url + "/", wait_until="domcontentloaded")
            wait("for the login form or the dashboard (#login-token or #whoami)",
                 lambda: page.wait_for_selector("#login-token, #whoami", state="visible"))
            report["token_required"] = page.is_visible("#login-token")
            shot(page, "login.png")
            if report["token_required"]:
                page.fill("#login-token", token)
                page.click("#login-submit")
                wait("for #whoami after logging in",
                     lambda: page.wait_for_selector("#whoami:visible, #login-error:visible"))
                if page.is_visible("#login-error"):
                    raise Failure("login refused: " + page.inner_text("#login-error"))
            report["logged_in"] = True
            user = steps.get("user")
            if user:
                page.fill("#view-user", user)
                page.press("#view-user", "Enter")
            wait("for the live events stream (#stream-status.live)",
                 lambda: page.wait_for_selector("#stream-status.live"))

            # Sessions and a transcript.
            page.click('a[data-page="sessions"]')
            wait("for the session list", lambda: page.wait_for_selector('#session-list[aria-busy="false"]'))
            key = steps.get("session")
            if key:
                row = attr_selector("data-session-key", key)
                wait("for session %r in the list" % key, lambda: page.wait_for_selector(row))
            report["sessions"] = attrs(page, "[data-session-key]", "data-session-key")
            if key:
                page.click(row)
                wait("for the transcript of %r" % key,
                     lambda: page.wait_for_selector('#transcript[aria-busy="false"] [data-role]'))
                text = steps.get("transcript_contains")
                if text:
                    wait("for the transcript to contain %r" % text, lambda: page.wait_for_function(
                        "t => (document.querySelector('#transcript') || {}).textContent.includes(t)",
                        arg=text))
                report["transcript"] = page.text_content("#transcript")
            shot(page, "sessions.png")

            # Approvals.
            page.click('a[data-page="approvals"]')
            if steps.get("approve"):
                card = wait("for a pending approval", lambda: page.wait_for_selector("[data-approval-id]"))
                approval = card.get_attribute("data-approval-id")
                report["pending_count"] = page.text_content("#pending-count")
                shot(page, "approvals.png")
                card.query_selector('button[data-decision="allow"]').click()
                gone = attr_selector("data-approval-id", approval)
                try:
                    page.wait_for_selector(gone, state="detached")
                except PlaywrightTimeout as e:
                    status = page.text_content(gone + " .card-status") or ""
                    raise Failure("timed out after 45 s waiting for approval %r to be answered "
                                  "(the card says: %r)" % (approval, status)) from e
                report["approved"] = approval
            else:
                page.wait_for_timeout(500)
                report["pending_count"] = page.text_content("#pending-count")
                shot(page, "approvals.png")

            # Live events.
            page.click('a[data-page="events"]')
            kind = steps.get("expect_event")
            if kind:
                wait("for a live event of type %r" % kind, lambda: page.wait_for_selector(
                    ".event-row" + attr_selector("data-event-type", kind)))
            report["events"] = attrs(page, ".event-row", "data-event-type")
            shot(page, "events.png")

            # Agents, their files and tools.
            page.click('a[data-page="agents"]')
            wait("for the agent list", lambda: page.wait_for_selector('#agent-list[aria-busy="false"]'))
            agent = steps.get("agent")
            if agent:
                row = attr_selector("data-agent-key", agent)
                wait("for agent %r in the list" % agent, lambda: page.wait_for_selector(row))
                page.click(row)
                wait("for the tools of agent %r" % agent,
                     lambda: page.wait_for_selector('#agent-tools[aria-busy="false"]'))
                first_file = page.query_selector("#agent-detail [data-file-name]")
                if first_file:
                    first_file.click()
                    wait("for an agent file to show",
                         lambda: page.wait_for_selector("#agent-file pre, #agent-file .error"))
            report["agents"] = attrs(page, "[data-agent-key]", "data-agent-key")
            shot(page, "agents.png")

            # Teams: a team's members and board.
            team = steps.get("team")
            if team:
                page.click('a[data-page="teams"]')
                wait("for the team list", lambda: page.wait_for_selector('#team-list[aria-busy="false"]'))
                row = attr_selector("data-team-name", team)
                wait("for team %r in the list" % team, lambda: page.wait_for_selector(row))
                page.click(row)
                wait("for the board of team %r" % team,
                     lambda: page.wait_for_selector('#team-board[aria-busy="false"]'))
                report["task_statuses"] = attrs(page, "#team-board [data-task-id]", "data-task-status")
                report["board_text"] = page.text_content("#team-board") or ""
                shot(page, "teams.png")

            # MCP (each section shows data, "not enabled" or an error).
            page.click('a[data-page="mcp"]')
            wait("for the MCP page", lambda: page.wait_for_function(
                "() => ['mcp-servers', 'mcp-grants', 'mcp-requests'].every("
                "id => document.getElementById(id) && document.getElementById(id).children.length)"))
            shot(page, "mcp.png")
            page.wait_for_timeout(300)  # late console messages
        except Failure as e:
            report["error"] = str(e)
            if page is not None:
                try:
                    shot(page, "failure.png")
                except Exception:  # noqa: BLE001 - the failure is what matters
                    pass
            print(json.dumps(report))
            print("dashboard.py: " + str(e), file=sys.stderr)
            return 1
        finally:
            browser.close()
    print(json.dumps(report))
    return 0


def attrs(page, selector, name):
    return page.eval_on_selector_all(selector, "(els, n) => els.map(e => e.getAttribute(n))", name)


def watch(page, report, errors):
    """Collects console errors, uncaught exceptions, failed requests and error responses."""

    def on_console(msg):
        if msg.type != "error":
            return
        # Chromium's line for an error response: reported below with its URL instead.
        if msg.text.startswith("Failed to load resource: the server responded with a status of"):
            return
        errors.append("console: " + msg.text)

    def on_failed(request):
        failure = request.failure or ""
        # The live events stream is aborted on purpose (user change, logout, closing).
        if "/v1/events" in request.url and "ERR_ABORTED" in failure:
            return
        errors.append("request failed: %s %s: %s" % (request.method, request.url, failure))

    def on_response(response):
        if response.status < 400:
            return
        entry = {"method": response.request.method, "url": response.url, "status": response.status}
        report["http_errors"].append(entry)
        if response.status not in (401, 404):
            errors.append("HTTP %d for %s %s" % (response.status, entry["method"], entry["url"]))

    page.on("console", on_console)
    page.on("pageerror", lambda e: errors.append("uncaught: " + str(e)))
    page.on("requestfailed", on_failed)
    page.on("response", on_response)


if __name__ == "__main__":
    sys.exit(main())
