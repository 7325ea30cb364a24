"""The inspector's login form: its page, the cookie it sets (signed with the password for one Host, expiring), the
check of that cookie, which the auth middleware accepts beside HTTP basic auth, and the cookie's clearing at logout."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import parse_qsl, quote

from jinja2 import Environment, PackageLoader, select_autoescape

COOKIE = "ocs_login"
LIFETIME_S = 12 * 3600
LOGIN_PATH = "/ui/login"
LOGOUT_PATH = "/ui/logout"
FORM_MAX_BYTES = 4096  # a user name and a password; anything longer is refused unread
_templates = Environment(loader=PackageLoader(__package__, "templates"), autoescape=select_autoescape())
CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"


def _signature(secret: bytes, expires: int, nonce: str, host: str) -> str:
    return hmac.new(secret, f"ocs-login|{expires}|{nonce}|{host.lower()}".encode(), hashlib.sha256).hexdigest()


def issue(secret: bytes, host: str, now: float | None = None) -> str:
    """A cookie value good for `host` until LIFETIME_S from now; `secret` is the user and password. Each value is
    new (a nonce), so logging one out ends that one only."""
    expires = int(now if now is not None else time.time()) + LIFETIME_S
    nonce = secrets.token_hex(8)
    return f"{expires}.{nonce}.{_signature(secret, expires, nonce, host)}"


def expiry(value: str) -> int:
    """When a cookie value from `issue` expires (epoch seconds)."""
    head = value.partition(".")[0]
    return int(head) if head.isdigit() else 0


def valid(secret: bytes, value: str, host: str, now: float | None = None) -> bool:
    expires_text, nonce, signature = (value.split(".", 2) + ["", ""])[:3]
    if not expires_text.isdigit() or int(expires_text) < (now if now is not None else time.time()):
        return False
    return hmac.compare_digest(signature, _signature(secret, int(expires_text), nonce, host))


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


def local_path(target: str | None) -> str:
    """Where to go after logging in: a path on this server only (never `//other.host` nor a scheme)."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")) or LOGIN_PATH in target:
        return "/"
    return target


def login_url(target: str) -> str:
    return f"{LOGIN_PATH}?next={quote(local_path(target), safe='')}"


def form_fields(body: bytes) -> dict[str, str]:
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def page(target: str, problem: str | None = None) -> bytes:
    return _templates.get_template("login.html").render(next=local_path(target), problem=problem).encode()
