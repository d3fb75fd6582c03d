"""The client's own HTTP/1.1 (connectors/http1.py, the default transport) behaves as aiohttp and httpx do.

Each test runs a real server on loopback that answers with exact bytes (framings, compression, stalls,
drops, garbage), and most run the same check over every transport: what the default gave up (aiohttp's
client) must not be a behaviour lost.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import json
import logging
import ssl
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from fleet_data.connectors import AsyncVehicleDataClient, RetryPolicy, Settings
from fleet_data.connectors import errors as e
from fleet_data.connectors import http1
from fleet_data.connectors.sandbox import FaultConfig, SandboxConfig, run_sandbox
from fleet_data.connectors.transport import AiohttpSession, Http1Session, open_session

KEY = "http1_test_key"
VIN = "1HGCM82633A004352"
ALL = ["http1", "aiohttp", "httpx"]
NO_RETRY = RetryPolicy(max_retries=0, max_500_retries=0)


@dataclass
class Request:
    line: str
    headers: dict[str, str]
    body: bytes

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.line.split(" ")[1]).query)


Respond = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]  # True: keep the connection open


@dataclass
class Server:
    """A loopback HTTP/1.1 server whose answers a test writes byte by byte (`respond`)."""

    respond: Respond
    requests: list[Request] = field(default_factory=list)
    connections: int = 0  # accepted in all
    open: int = 0
    peak: int = 0  # most open at once
    url: str = ""

    async def __aenter__(self) -> "Server":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = "http://127.0.0.1:%d" % self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.peak = max(self.peak, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, *lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                request = Request(line, headers, body)
                self.requests.append(request)
                if not await self.respond(request, writer):
                    return
        finally:
            self.open -= 1
            writer.close()


def answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{head}".encode() + b"\r\n" + body


def specs(vin: str = VIN) -> bytes:
    return json.dumps({"success": True, "input": {"vin": vin}, "attributes": {"year": "2020", "make": "Honda"}}).encode()


def settings(url: str, transport: str, **overrides: object) -> Settings:
    return replace(Settings(api_key=KEY, base_url=url, transport=transport, retry=NO_RETRY), **overrides)


def fixed(data: bytes | Callable[[Request], bytes], keep: bool = True) -> Respond:
    async def respond(request: Request, writer: asyncio.StreamWriter) -> bool:
        writer.write(data(request) if callable(data) else data)
        await writer.drain()
        return keep

    return respond


# -- answers arrive whole, however they are framed ------------------------------------------------

FRAMINGS = {
    "content-length": lambda b: answer(b, f"Content-Length: {len(b)}"),
    "chunked": lambda b: answer(b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (b[:7], b[7:30], b[30:])) + b"0\r\n\r\n",
                                "Transfer-Encoding: chunked"),
    "gzip": lambda b: answer(gzip.compress(b), "Content-Encoding: gzip", f"Content-Length: {len(gzip.compress(b))}"),
    "deflate": lambda b: answer(zlib.compress(b), "Content-Encoding: deflate", f"Content-Length: {len(zlib.compress(b))}"),
}


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
@pytest.mark.parametrize("transport", ALL)
async def test_an_answer_arrives_whole_however_it_is_framed(transport, framing):
    async with Server(fixed(lambda r: FRAMINGS[framing](specs(r.query["vin"][0])))) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport)) as client:
            for vin in (VIN, VIN[:-1] + "3"):  # twice: the connection is reused after each framing
                got = await client.request("specs", {"vin": vin}, raw=True)
                assert json.loads(got.raw) == json.loads(specs(vin)) and got.body["input"]["vin"] == vin
        assert server.connections == 1
    assert "gzip" in server.requests[0].headers["accept-encoding"]  # asked for, as aiohttp asks


@pytest.mark.parametrize("transport", ALL)
async def test_an_answer_that_ends_where_its_connection_does_arrives_whole(transport):
    async with Server(fixed(answer(specs()), keep=False)) as server:  # no length, no chunks: ends at close
        async with AsyncVehicleDataClient(settings(server.url, transport)) as client:
            assert (await client.request("specs", {"vin": VIN})).body["attributes"]["make"] == "Honda"
            assert (await client.request("specs", {"vin": VIN})).body["attributes"]["make"] == "Honda"
        assert server.connections == 2


@pytest.mark.parametrize("transport", ALL)
async def test_connection_close_is_honoured(transport):
    body = specs()
    async with Server(fixed(answer(body, f"Content-Length: {len(body)}", "Connection: close"), keep=False)) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport)) as client:
            for _ in range(3):
                assert (await client.request("specs", {"vin": VIN})).status == 200
        assert server.connections == 3


# -- timeouts: silence, not slowness --------------------------------------------------------------

@pytest.mark.parametrize("transport", ALL)
async def test_a_slow_answer_is_no_timeout_while_its_bytes_keep_coming(transport):
    """The read timeout bounds the silence between two reads (aiohttp's sock_read), not the whole answer."""
    body = specs()
    framed = answer(body, f"Content-Length: {len(body)}")

    async def trickle(request: Request, writer: asyncio.StreamWriter) -> bool:
        step = len(framed) // 6 + 1
        for start in range(0, len(framed), step):  # six pieces, 0.8 s apart: 4 s in all
            if start:
                await asyncio.sleep(0.8)
            writer.write(framed[start:start + step])
            await writer.drain()
        return True

    async with Server(trickle) as server:
        timeout = httpx.Timeout(connect=5.0, read=2.5, write=5.0, pool=5.0)
        async with AsyncVehicleDataClient(settings(server.url, transport, timeout=timeout)) as client:
            assert (await client.request("specs", {"vin": VIN})).status == 200  # 4 s in all, never 2.5 s silent


@pytest.mark.parametrize("transport", ALL)
async def test_silence_after_the_request_is_a_timeout_of_a_call_that_was_sent(transport):
    async def never(request: Request, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(30)
        return False

    seen = []
    async with Server(never) as server:
        timeout = httpx.Timeout(connect=5.0, read=0.5, write=5.0, pool=5.0)
        async with AsyncVehicleDataClient(settings(server.url, transport, timeout=timeout), on_call=seen.append) as client:
            with pytest.raises(e.APITimeoutError) as caught:
                await client.request("specs", {"vin": VIN})
    assert caught.value.sent is True
    assert seen[0].unknown and seen[0].units == 1  # billed perhaps: counted as what it may have cost
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("transport", ALL)
async def test_a_refused_connection_is_a_call_never_sent(transport, unused_tcp_port):
    seen = []
    async with AsyncVehicleDataClient(settings(f"http://127.0.0.1:{unused_tcp_port}", transport), on_call=seen.append) as client:
        with pytest.raises(e.APIConnectionError) as caught:
            await client.request("specs", {"vin": VIN})
    assert caught.value.sent is False and not seen[0].unknown and seen[0].units == 0
    assert KEY not in str(caught.value) and caught.value.__cause__ is None


# -- the pool --------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ALL)
async def test_no_more_connections_than_allowed_and_each_is_kept_alive(transport):
    body = specs()

    async def slowly(request: Request, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.02)  # calls overlap: the pool is full
        writer.write(answer(body, f"Content-Length: {len(body)}"))
        await writer.drain()
        return True

    async with Server(slowly) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport, max_connections=4)) as client:
            answers = await asyncio.gather(*(client.request("specs", {"vin": VIN}) for _ in range(40)))
        assert [a.status for a in answers] == [200] * 40
        assert server.peak <= 4 and server.connections <= 4


@pytest.mark.parametrize("transport", ALL)
async def test_a_call_given_up_never_leaves_its_answer_to_the_next(transport):
    """A call cancelled while its answer is owed: its connection is not reused, or the next call would read
    the answer meant for the one before (another VIN's data)."""
    arrived = asyncio.Event()

    async def late(request: Request, writer: asyncio.StreamWriter) -> bool:
        arrived.set()
        await asyncio.sleep(0.3)
        writer.write(FRAMINGS["content-length"](specs(request.query["vin"][0])))
        await writer.drain()
        return True

    async with Server(late) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport, max_connections=1)) as client:
            first = asyncio.ensure_future(client.request("specs", {"vin": VIN}))
            await asyncio.wait_for(arrived.wait(), 30)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            other = VIN[:-1] + "9"
            assert (await client.request("specs", {"vin": other})).body["input"]["vin"] == other


@pytest.mark.parametrize("transport", ALL)
async def test_an_answer_that_is_not_http_is_a_connection_error_after_sending(transport):
    seen = []
    async with Server(fixed(b"HELLO THERE\r\n\r\n", keep=False)) as server:
        policy = RetryPolicy(max_retries=1, initial_backoff=0.001)
        async with AsyncVehicleDataClient(settings(server.url, transport, retry=policy), on_call=seen.append) as client:
            with pytest.raises(e.APIConnectionError) as caught:
                await client.request("specs", {"vin": VIN})
    assert caught.value.sent is True
    assert len(server.requests) == 2 == len(seen)  # retried by the policy, once, and each attempt recorded


# -- requests as the service reads them -----------------------------------------------------------

@pytest.mark.parametrize("transport", ALL)
async def test_query_values_arrive_as_given_and_the_key_only_in_the_query(transport, caplog):
    caplog.set_level(logging.INFO)
    odd = {"vin": VIN, "make": "Land Rover & Co", "model": "C+D=E/F", "trim": "Édition ü", "year": 2020}
    async with Server(fixed(lambda r: FRAMINGS["content-length"](specs()))) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport)) as client:
            await client.request("year-make-model", odd)
    (request,) = server.requests
    assert request.query == {**{k: [str(v)] for k, v in odd.items()}, "key": [KEY]}
    assert request.headers["accept"] == "application/json" and request.headers["user-agent"].startswith("fleet-data/")
    assert len(request.headers["idempotency-key"]) == 32
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in logged
    if transport == "http1":
        assert "HTTP Request: GET " in logged and "key=[redacted]" in logged


@pytest.mark.parametrize("transport", ALL)
async def test_a_post_carries_its_json_body_and_idempotency_key(transport):
    submitted = json.dumps({"success": True, "data": {"batchId": "b1", "status": "queued", "totalVins": 2}}).encode()
    async with Server(fixed(FRAMINGS["content-length"](submitted))) as server:
        async with AsyncVehicleDataClient(settings(server.url, transport)) as client:
            await client.request("recalls-batch-submit", json_body={"vins": [VIN, VIN]}, idempotency_key="k" * 32)
    (request,) = server.requests
    assert request.line.startswith("POST /v1/recalls-batch/submit?key=")
    assert json.loads(request.body) == {"vins": [VIN, VIN]} and request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == "k" * 32


@pytest.mark.parametrize("transport", ["http1", "httpx"])
async def test_a_base_url_with_a_path_prefixes_every_call(transport):
    async with Server(fixed(lambda r: FRAMINGS["content-length"](specs()))) as server:
        async with AsyncVehicleDataClient(settings(server.url + "/vds/", transport)) as client:
            await client.request("specs", {"vin": VIN})
    assert server.requests[0].line.startswith("GET /vds/specs?vin=")


def test_a_proxy_from_the_environment_is_aiohttps_to_speak_to(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    through = Settings(api_key=KEY, base_url="http://vds.example.test")
    assert isinstance(open_session(through, str), AiohttpSession)
    monkeypatch.setenv("NO_PROXY", "vds.example.test")
    assert isinstance(open_session(through, str), Http1Session)


# -- the sandbox, and TLS ----------------------------------------------------------------------------

def test_a_dropped_connection_is_retried_only_by_our_policy():
    async def run(url: str, sandbox) -> list:  # noqa: ANN001
        seen: list = []
        policy = RetryPolicy(max_retries=2, initial_backoff=0.001)
        async with AsyncVehicleDataClient(Settings(api_key="drop_test_key", base_url=url, retry=policy),
                                          on_call=seen.append) as client:
            await client.specs(VIN)  # leaves a kept-alive connection in the pool
            sandbox.set_faults(FaultConfig(drop_rate=1.0))
            sandbox.reset_stats()
            with pytest.raises(e.APIConnectionError):
                await client.specs("1HGCM82633A004353")
        return seen

    with run_sandbox(SandboxConfig()) as sandbox:
        seen = asyncio.run(run(sandbox.url, sandbox))
        assert sandbox.count("/specs") == 3
    assert len(seen) - 1 == 3 and all(s.unknown for s in seen[1:])  # 1 + 2 retries, each recorded, none of our own


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A CA, and a certificate it signed for 127.0.0.1: (server context, a client context trusting the CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("test CA")).issuer_name(name("test CA"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(2).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    client = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


async def test_https_is_verified_against_the_systems_authorities_and_spoken_when_trusted(tls, monkeypatch):
    server_context, trusting = tls
    body = specs()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer(body, f"Content-Length: {len(body)}"))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client refused our certificate
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    url = "https://127.0.0.1:%d" % server.sockets[0].getsockname()[1]
    try:
        async with AsyncVehicleDataClient(settings(url, "http1")) as client:
            with pytest.raises(e.APIConnectionError) as caught:  # a CA of our own: the system does not trust it
                await client.request("specs", {"vin": VIN})
        assert caught.value.sent is False and "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
        monkeypatch.setattr(http1, "_TLS", [trusting])
        async with AsyncVehicleDataClient(settings(url, "http1")) as client:
            assert (await client.request("specs", {"vin": VIN})).body["attributes"]["make"] == "Honda"
    finally:
        server.close()
