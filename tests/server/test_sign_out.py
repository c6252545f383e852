"""Signing out ends the session on the server (issue 35): a copy of the cookie, taken before
the sign-out, is refused afterwards, on a real uvicorn."""

from __future__ import annotations

import re

import httpx

from interlude.server import create_app
from tests.support.serving import serving

from . import inbox_app
from .conftest import ANA, BO, TOKENS

COOKIE = "interlude_session"


def _sign_in(http: httpx.Client, token: str = ANA) -> str:
    page = http.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text
    r = http.post("/login", data={"token": token, "csrf": csrf.group(1)}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return http.cookies[COOKIE]


def _logout_csrf(http: httpx.Client) -> str:
    page = http.get("/")
    csrf = re.search(r'action="/logout".*?name="csrf" value="([^"]+)"', page.text, re.DOTALL)
    assert csrf, page.text
    return csrf.group(1)


def _doors(url: str, cookie: str) -> tuple[int, int, int]:
    """What ``cookie`` gets from the doors a cookie opens: the list page (200, or 303 to the
    sign-in), the live list (200 or 401) and an answer form without its CSRF token (403: the
    cookie was taken, the form refused; or 401)."""
    with httpx.Client(base_url=url, cookies={COOKIE: cookie}) as copy:
        page = copy.get("/", follow_redirects=False)
        assert page.status_code == 200 or page.headers["location"] == "/login"
        with copy.stream("GET", "/events", timeout=5) as stream:
            events = stream.status_code
        form = copy.post("/sessions/s1/answer", data={"answer": "true"})
        return page.status_code, events, form.status_code


SIGNED_IN = (200, 200, 403)
REFUSED = (303, 401, 401)


def test_a_copied_cookie_is_refused_after_sign_out(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS)
    with (
        serving(asgi) as url,
        httpx.Client(base_url=url) as browser,
        httpx.Client(base_url=url) as other,
    ):
        copied = _sign_in(browser)
        kept = _sign_in(other)  # the same person in another browser
        assert _doors(url, copied) == SIGNED_IN  # a copy works while the session lasts
        # a sign-out refused (a forged form) ends nothing
        forged = browser.post("/logout", data={"csrf": "x"}, follow_redirects=False)
        assert forged.status_code == 403 and _doors(url, copied) == SIGNED_IN
        r = browser.post("/logout", data={"csrf": _logout_csrf(browser)}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert _doors(url, copied) == REFUSED
        assert other.get("/").status_code == 200  # only that session ended
        assert _doors(url, kept) == SIGNED_IN
        assert _sign_in(browser, BO) != copied  # signing in again works
        assert browser.get("/").status_code == 200
