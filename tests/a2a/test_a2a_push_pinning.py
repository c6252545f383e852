"""Push notifications go to the address their screen checked, not to a second lookup of the
name (DNS rebinding): a send resolves the webhook's host once, screens every address it gets,
and connects to the first, with the name kept for the ``Host`` header and for TLS (the
certificate is checked against the name). Also: no credentials over plain http with the
default screen, and at most so many configurations per task and per person.

The names resolve through a fake resolver (``Pushes(resolve=)``) and, where a test must reach a
loopback receiver, the address screen is told which address is acceptable (``accept=``): the
system resolver is walled off (``no_dns``) so nothing else can resolve them. Loopback only."""

from __future__ import annotations

import datetime
import ipaddress
import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import (
    AuthenticationInfo,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError

from interlude.a2a._events import status_event
from interlude.a2a._push import Pushes, public_address
from tests.support.ports import free_port
from tests.support.serving import serving

PUBLIC = "93.184.216.34"
"""A public address no test connects to (the screen takes it; the sends never reach it)."""

INPUT_REQUIRED = status_event("t-1", TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED))


# --- helpers ------------------------------------------------------------------------------------


class Resolver:
    """A fake DNS: each name's answers in turn (its last answer repeats), every lookup kept."""

    def __init__(self, answers: dict[str, Sequence[Sequence[str]]]) -> None:
        self.answers = {name: list(each) for name, each in answers.items()}
        self.lookups: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        answers = self.answers.get(host)
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not known")
        return list(answers.pop(0) if len(answers) > 1 else answers[0])


@dataclass
class Receiver:
    """A webhook on a loopback port that takes whatever comes: each request's headers and
    body kept; it answers ``answers`` in turn, then 200."""

    port: int
    answers: list[int]
    seen: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def receiver(
    *answers: int, host: str = "127.0.0.1", tls: tuple[Path, Path] | None = None
) -> Iterator[Receiver]:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    port = _free_port(host)
    got = Receiver(port, list(answers))
    lock = threading.Lock()

    async def take(request: Request) -> JSONResponse:
        seen = {"headers": dict(request.headers), "body": json.loads(await request.body())}
        with lock:
            got.seen.append(seen)
            code = got.answers.pop(0) if got.answers else 200
        return JSONResponse({}, status_code=code)

    options: dict[str, Any] = {"host": host, "port": port}
    if tls is not None:
        options.update(ssl_certfile=str(tls[0]), ssl_keyfile=str(tls[1]))
    with serving(Starlette(routes=[Route("/hook", take, methods=["POST"])]), **options):
        yield got


def _free_port(host: str) -> int:
    if ":" not in host:
        return free_port(host)
    with socket.socket(socket.AF_INET6) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The system resolver answers IP addresses only: the names a test asks it are kept
    (none should be: a send connects to the address its screen resolved)."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def numeric_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None:
            text = host.decode() if isinstance(host, bytes) else str(host)
            try:
                ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError:
                asked.append(text)
                raise socket.gaierror(socket.EAI_NONAME, "no DNS in these tests") from None
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", numeric_only)
    return asked


def ana(context: ServerCallContext) -> str:
    return str(context.state.get("who", "ana"))


def as_(who: str) -> ServerCallContext:
    return ServerCallContext(state={"who": who})


def config(
    url: str, *, id: str = "", credentials: str = "", token: str = "tok-1"
) -> TaskPushNotificationConfig:
    out = TaskPushNotificationConfig(url=url, id=id, token=token)
    if credentials:
        out.authentication.CopyFrom(AuthenticationInfo(scheme="Bearer", credentials=credentials))
    return out


def loopback(address: str) -> bool:
    """The screen these tests give a send: their receiver's loopback address only."""
    return address in ("127.0.0.1", "::1")


# --- the address screen -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        (PUBLIC, True),
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),  # IPv4-mapped: judged as 8.8.8.8
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # shared address space
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("239.1.2.3", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("fec0::1", False),  # site-local
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("::ffff:10.0.0.1", False),
        ("::ffff:169.254.169.254", False),
        ("2002:a00:1::1", False),  # 6to4 of 10.0.0.1
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("64:ff9b:1::1", False),  # local-use NAT64
        ("not an address", False),
    ],
)
def test_only_public_addresses_pass_the_default_screen(address: str, public: bool) -> None:
    assert public_address(address) is public


async def test_a_name_that_also_resolves_to_an_internal_address_is_refused() -> None:
    """Every address the name resolves to must be public, not just one of them."""
    dns = Resolver({"mixed.example.invalid": [[PUBLIC, "10.0.0.7"]]})
    pushes = Pushes(ana, resolve=dns)
    with pytest.raises(InvalidParamsError, match="refused"):
        await pushes.set("t-1", config("https://mixed.example.invalid/hook"), as_("ana"))
    assert await pushes.listed("t-1", as_("ana")) == []


# --- DNS rebinding ------------------------------------------------------------------------------


async def test_a_name_rebound_to_an_internal_address_gets_nothing(
    no_dns: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Public when registered, loopback when the notification goes: nothing is sent to the
    loopback receiver (which would take it), and the refusal is logged."""
    with receiver() as inside:
        name = "rebind.example.invalid"
        dns = Resolver({name: [[PUBLIC], ["127.0.0.1"]]})
        pushes = Pushes(ana, resolve=dns)  # the default screen: public addresses only
        await pushes.set("t-1", config(f"http://{name}:{inside.port}/hook"), as_("ana"))
        with caplog.at_level(logging.WARNING, logger="interlude.a2a"):
            await pushes.send_notification("t-1", INPUT_REQUIRED)
    assert inside.seen == []
    assert dns.lookups == [(name, inside.port)] * 2  # the registration's, the send's
    [refusal] = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    assert name in refusal and "127.0.0.1" in refusal
    assert no_dns == []


async def test_a_send_connects_to_the_address_it_screened_with_the_name_as_host(
    no_dns: list[str],
) -> None:
    """The name resolves once per send (a retry reuses the address) to the address the screen
    took, and the request carries the name: ``Host: name:port``. A second lookup of the name
    would get an internal address (the fake DNS's next answer) or nothing (the system's)."""
    with receiver(503) as hook:  # busy once: the retry goes to the same address
        name = "hooks.example.invalid"
        dns = Resolver({name: [["127.0.0.1"], ["127.0.0.1"], ["10.0.0.7"]]})
        pushes = Pushes(ana, resolve=dns, accept=loopback)
        pushes.backoff = 0.0
        url = f"http://{name}:{hook.port}/hook"
        await pushes.set("t-1", config(url, token="tok-9"), as_("ana"))
        await pushes.send_notification("t-1", INPUT_REQUIRED)
    assert len(hook.seen) == 2  # 503, then taken
    for seen in hook.seen:
        assert seen["headers"]["host"] == f"{name}:{hook.port}"
        assert seen["headers"]["x-a2a-notification-token"] == "tok-9"
        assert seen["body"]["statusUpdate"]["taskId"] == "t-1"
    assert dns.lookups == [(name, hook.port)] * 2  # registration, then once for the send
    assert no_dns == []  # httpx never looked the name up itself


async def test_an_ipv6_address_is_connected_to_bracketed(no_dns: list[str]) -> None:
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with receiver(host="::1") as hook:
        name = "v6.example.invalid"
        pushes = Pushes(ana, resolve=Resolver({name: [["::1"]]}), accept=loopback)
        await pushes.set("t-1", config(f"http://{name}:{hook.port}/hook"), as_("ana"))
        await pushes.send_notification("t-1", INPUT_REQUIRED)
    [seen] = hook.seen
    assert seen["headers"]["host"] == f"{name}:{hook.port}"
    assert no_dns == []


async def test_a_custom_url_check_decides_and_the_send_is_still_pinned(no_dns: list[str]) -> None:
    """``push_url_check`` decides on the URL (here: the name), whatever its addresses; the
    POST still goes to the address resolved for it, with the name as host."""
    with receiver() as hook:
        name = "allowed.example.invalid"

        async def allowlist(url: str) -> bool:
            return url.startswith(f"http://{name}:")

        dns = Resolver({name: [["127.0.0.1"]]})
        pushes = Pushes(ana, allowlist, resolve=dns)
        with pytest.raises(InvalidParamsError, match="refused"):
            await pushes.set(
                "t-1", config(f"http://other.example.invalid:{hook.port}/hook"), as_("ana")
            )
        url = f"http://{name}:{hook.port}/hook"
        await pushes.set("t-1", config(url, credentials="s3cret"), as_("ana"))  # its own rules
        await pushes.send_notification("t-1", INPUT_REQUIRED)
    [seen] = hook.seen
    assert seen["headers"]["host"] == f"{name}:{hook.port}"
    assert seen["headers"]["authorization"] == "Bearer s3cret"
    assert no_dns == []


# --- TLS keeps the name -------------------------------------------------------------------------


def certificate(folder: Path, name: str) -> tuple[Path, Path, ssl.SSLContext]:
    """A self-signed certificate for ``name`` only (no IP address in it): its files, and a
    client context that trusts it and checks host names."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(pem)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(cadata=pem.decode("ascii"))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    return cert_path, key_path, context


async def test_tls_checks_the_certificate_against_the_name_not_the_address(
    tmp_path: Path, no_dns: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The receiver's certificate names ``hooks.example.test`` and no address: a send to that
    name, connected to 127.0.0.1, passes the check (so TLS used the name); another name on the
    same address does not (so the check is made, against the URL's name)."""
    pytest.importorskip("cryptography")
    cert, key, trusted = certificate(tmp_path, "hooks.example.test")
    with receiver(tls=(cert, key)) as hook:
        good, bad = "hooks.example.test", "other.example.test"
        dns = Resolver({good: [["127.0.0.1"]], bad: [["127.0.0.1"]]})
        pushes = Pushes(ana, resolve=dns, accept=loopback)
        pushes.tls = trusted
        pushes.attempts = 1
        await pushes.set(
            "t-1",
            config(f"https://{good}:{hook.port}/hook", id="good", credentials="s3cret"),
            as_("ana"),
        )
        await pushes.set("t-1", config(f"https://{bad}:{hook.port}/hook", id="bad"), as_("ana"))
        with caplog.at_level(logging.WARNING, logger="interlude.a2a"):
            await pushes.send_notification("t-1", INPUT_REQUIRED)
    [seen] = hook.seen
    assert seen["headers"]["host"] == f"{good}:{hook.port}"
    assert seen["headers"]["authorization"] == "Bearer s3cret"
    [failure] = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert bad in failure and "certificate" in failure.lower()
    assert no_dns == []


# --- credentials in clear -----------------------------------------------------------------------


async def test_credentials_are_refused_on_plain_http_with_the_default_screen() -> None:
    dns = Resolver({"hooks.example.invalid": [[PUBLIC]]})
    pushes = Pushes(ana, resolve=dns)
    context = as_("ana")
    with pytest.raises(InvalidParamsError, match="plain http"):
        await pushes.set(
            "t-1", config("http://hooks.example.invalid/hook", credentials="s3cret"), context
        )
    with pytest.raises(InvalidParamsError, match="plain http"):
        await pushes.set("t-1", config("http://me:pw@hooks.example.invalid/hook"), context)
    assert await pushes.listed("t-1", context) == []
    assert dns.lookups == []  # refused before anything is resolved

    await pushes.set("t-1", config("http://hooks.example.invalid/hook", id="token"), context)
    secret = config("https://hooks.example.invalid/hook", id="tls", credentials="s3cret")
    await pushes.set("t-1", secret, context)
    assert sorted(c.id for c in await pushes.listed("t-1", context)) == ["tls", "token"]


# --- how many -----------------------------------------------------------------------------------


async def test_configurations_are_capped_per_task_and_per_person() -> None:
    """At most ``per_task`` on a task (everyone's together) and ``per_owner`` per person; a
    replacement adds none, a deletion or the task's end makes room."""
    name = "hooks.example.invalid"
    dns = Resolver({name: [[PUBLIC]]})
    pushes = Pushes(ana, resolve=dns)
    pushes.per_owner = 12
    url = f"https://{name}/hook"
    for n in range(10):
        await pushes.set("t-1", config(url, id=f"c{n}"), as_("ana"))
    with pytest.raises(InvalidParamsError, match="most a task may have"):
        await pushes.set("t-1", config(url, id="c10"), as_("ana"))
    with pytest.raises(InvalidParamsError, match="most a task may have"):
        await pushes.set("t-1", config(url, id="bo-s"), as_("bo"))
    await pushes.set("t-1", config(url, id="c3", token="new"), as_("ana"))  # replaces
    assert len(await pushes.listed("t-1", as_("ana"))) == 10

    await pushes.set("t-2", config(url, id="a"), as_("ana"))
    await pushes.set("t-2", config(url, id="b"), as_("ana"))
    with pytest.raises(InvalidParamsError, match="most one person may have"):
        await pushes.set("t-3", config(url), as_("ana"))
    await pushes.set("t-3", config(url), as_("bo"))  # bo has room
    await pushes.delete("t-2", "a", as_("ana"))
    await pushes.set("t-3", config(url), as_("ana"))
    assert len(await pushes.listed("t-3", as_("ana"))) == 1

    # t-1 ends: its configurations go with it (the sends find the name internal now: nothing
    # leaves this machine), and ana has room again
    dns.answers[name] = [["127.0.0.1"]]
    done = status_event("t-1", TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    await pushes.send_notification("t-1", done)
    assert await pushes.listed("t-1", as_("ana")) == []
    dns.answers[name] = [[PUBLIC]]
    await pushes.set("t-4", config(url), as_("ana"))
