"""The inspector's login form: its page, the cookie it sets (a random token the auth middleware maps to a login for
one Host, expiring), which that middleware accepts beside HTTP basic auth, and the cookie's clearing at logout."""

from __future__ import annotations

import secrets
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote

if TYPE_CHECKING:
    from jinja2 import Environment

COOKIE = "ocs_login"
LIFETIME_S = 12 * 3600
LOGIN_PATH = "/ui/login"
LOGOUT_PATH = "/ui/logout"
FORM_MAX_BYTES = 4096  # a user name and a password; anything longer is refused unread
CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"


def issue() -> str:
    """A new cookie value: 256 random bits, which mean nothing but the login the server maps them to (nothing about
    the password can be learnt from one, and no other server or port takes it)."""
    return secrets.token_urlsafe(32)


def cookie_value(header: bytes) -> str | None:
    """Our cookie's value in a Cookie header, if it holds one."""
    for part in header.decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def set_cookie(value: str, secure: bool) -> str:
    # HttpOnly: no script reads it; SameSite=Strict: no other site's page makes the browser send it
    return (f"{COOKIE}={value}; Path=/; Max-Age={LIFETIME_S}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def clear_cookie(secure: bool) -> str:
    return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


# What a `next` target may hold as it is: a path's and a query's characters. Anything else (a tab or a line break,
# which browsers drop from a URL or which cannot go in a header; a backslash, which browsers read as `/`; a space;
# non-ASCII) is percent-encoded, so the target stays one path on this server and a header can carry it.
_TARGET_SAFE = "/?#&=%:@!$'()*+,;~-._[]"


def local_path(target: str | None) -> str:
    """Where to go after logging in: a path on this server only (never `//other.host` nor a scheme), encoded so that
    no character of it turns it into another host's URL or breaks the header it goes in."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    target = quote(target, safe=_TARGET_SAFE)
    return "/" if target.startswith("//") or LOGIN_PATH in target else target


def login_url(target: str) -> str:
    return f"{LOGIN_PATH}?next={quote(local_path(target), safe='')}"


def form_fields(body: bytes) -> dict[str, str]:
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


@lru_cache(maxsize=1)
def _templates() -> Environment:
    from jinja2 import Environment, PackageLoader, select_autoescape  # with the first login page, not at start-up

    return Environment(loader=PackageLoader(__package__, "templates"), autoescape=select_autoescape())


def page(target: str, problem: str | None = None) -> bytes:
    return _templates().get_template("login.html").render(next=local_path(target), problem=problem).encode()
