"""Real receivers on loopback: an HTTP server that records what webhooks POST (answering with
the statuses a test scripts), and an SMTP server (aiosmtpd) with STARTTLS on a self-signed
certificate."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        mac = hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-interlude-signature", ""), f"sha256={mac}")


@dataclass
class Receiver:
    """A webhook receiver: ``statuses`` are answered first, in order, then 200."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)

    @property
    def delivered(self) -> list[Any]:
        """The bodies of the POSTs answered 2xx, de-duplicated by notification id, as a
        receiver should."""
        seen: dict[str, Any] = {}
        for r in self.got:
            if r.headers.get("x-answered") == "200":
                seen.setdefault(r.headers["x-interlude-notification-id"], r.json)
        return list(seen.values())


def start_receiver() -> tuple[Receiver, ThreadingHTTPServer]:
    receiver = Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers["x-answered"] = str(status)
                receiver.got.append(Received(headers, body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() returns within 0.05 s (the default 0.5 s is each test's)
    serve = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    serve.daemon = True
    serve.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    return receiver, server


def self_signed(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) files for 127.0.0.1 and localhost, made with ``cryptography``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
