"""The sandbox: the Vehicle Data Service as the spec describes it, served on loopback.

Think Stripe's test mode: the default target when no API key is configured, the server every
integration test talks to, and the knob we turn to test faults and measure speed.

Start it
    fleet sandbox [--host 127.0.0.1] [--port N] [--latency-ms 50 | 20-80] [--fault-rate 0.1] [--seed N]
                  [--batch-rate VINS_PER_SECOND] [--insecure-webhooks] [--vehicles FILE]
                                                                           (= python -m connectors.sandbox)
    with run_sandbox(SandboxConfig(...)) as sb: ...   # background thread, free loopback port
    sb = Sandbox.start_subprocess(["--fault-rate", "0.1"]); ...; sb.stop()   # child process
The child prints `SANDBOX_URL=http://127.0.0.1:PORT` as its first stdout line and nothing else;
the sandbox never prints or logs API keys (aiohttp's access log is off).

Test keys (pass as `key=`; see TEST_KEYS)
    any other non-empty key   active standard plan, no quota limit, no ownership access
    test_enterprise           enterprise plan, ownership allowed (by VIN, phone, person, address, ZIP)
    test_blocked              403 blocked;  test_inactive 401 not active;  test_unknown 401 not found
    test_basic_tier           403 tier message on /history, /v1/lien-theft, /v2/marketvalue;
                              /v1/recalls-ymm 404 'This feature is not enabled for your account'
    test_prepaid_<N>          N prepaid credits; 402 insufficient_credits, nothing spent on rejection
    test_quota_<N>            N units per API per month; 429 with usage{current,limit,remaining}
    test_recharge_<N>         prepaid; the first N requests answer 503 code=auto_recharge_pending
                              (retryable:true, no Retry-After: the client backs off on its own)
    missing key               401 'Missing API key'
Accounts can also be registered: SandboxConfig(accounts={...}), sb.add_account(key, Account(...)).

Billing (units are quota units and prepaid credits alike)
    1 unit per successful call; 400 validation errors, 404 not-found and 5xx answers cost nothing.
    Quota groups: market-value (v1+v2); recalls (recalls, recalls-ymm, recalls-batch); plate-decoder
    (v1, v2, US); ownership (VIN, person, address, ZIP); every other API its own. Batch submit: 1 per
    VIN. US plate: 5 (+1 `specs` with decodeVIN). v2 plate ES require_vin=true: 2. US fan-out: 1 per
    hit, 0 and 404 on no hit. ymm-options dimension=variants with year+make, no model: 1 per model
    (modelCount). Ownership: 1 per owner or record returned; phone: 1 per matched number. Batch
    status/results/download: free.

Paths the spec does not show follow the vendor's SDKs (PyPI `carsxe`, npm `carsxe-api`, 1.4.0):
POST /platerecognition and /v1/vinocr (`image` or `upload_url`), GET /obdcodesdecoder (any
well-formed P/B/C/U code plus 4 hex digits decodes), GET /v1/ymm, GET /v1/ownership/person,
/address and /zip. `source=pip|npm`, which both SDKs add to every call, is accepted everywhere and
changes nothing; /specs takes `deepdata` and the Python SDK's `deepData`.

Test VINs (deterministic; data derive from sha256 of the VIN)
    1HGCM82633A004352   the spec examples' VIN: data on every endpoint (recalls, lien/theft, owners)
    1HGCM82633A004353   US Honda with data and no open recalls
    1HGCM82633A004363   no data (404) on every VIN endpoint (about 3% of VINs)
    WBA3A5C50DF123456   international: /specs answers via the international fallback;
                        with disableIntVINDecoding=1 it answers 404 (deepdata message)
    Last six characters pick a fixed answer on every VIN endpoint, nothing billed:
    000404 no data; 000500 500 'Internal server error'; 000501 500 CV-001 (CV-002 on /history);
    000502 502 'Could not fetch data' retryable; 000503 503 'Cannot access the internet at this time'
    (ownership: 'The Ownership API is temporarily unavailable.'); 000504 504 'Request timed out.'.
    About 60% of VINs have no lien/theft events (404 'No lien or theft data found for this VIN'),
    about a quarter have no ownership record; about a third have open recalls.

Legacy v1 quirks kept on purpose: /marketvalue answers validation problems as HTTP 500 with
success:false and the validation message; /images without make or model answers 500
'Please supply a make and model...'. `format=xml` works on /specs, /marketvalue, /history,
/images and /platedecoder. VIN lookups echo `key` in `input` as the real service does.

Faults (FaultConfig; at start or at run time via sb.set_faults): `rate` of calls answer one of
`statuses` (500/502/503/504 with the catalog messages; retryable ones carry Retry-After: 60 unless
omit_retry_after), timeouts, dropped connections, malformed 200 bodies, slow calls, per-call
latency, failed batches. Seeded: the same seed and request sequence replay the same faults.

Changing a vehicle between runs (connectors.sandbox.control): every answer is a pure function of
the VIN, so nothing changes by itself; tell a running sandbox (thread or child process) that one did:
    sb.set_vehicle(vin, recalls=[{"nhtsa_campaign_number": "26V999000", "park_it": True}, ...],
                   value_factor=1.2, title_brands=["Salvage"], lien_theft=[...] or None,
                   history={"historyInformation": [...]}, specs={"trim": "Sport"})
    = POST /_sandbox/vehicles/{vin} with that JSON; each call replaces only the fields it names;
    sb.clear_vehicles(vin) (DELETE) brings the generated answers back; `--vehicles FILE` starts with a
    JSON object of overrides keyed by VIN. The batch count agrees with the per-VIN recall list.

Admin routes (no key, never counted or faulted): see connectors.sandbox.server. Stats shape:
    {"requests": [{"endpoint": "/specs", "key": "k", "status": 200, "count": 3}, ...],
     "units": [{"key": "k", "api": "specs", "units": 3}, ...], "total": 3}
status 0 means the connection was dropped by a fault.
"""
from .accounts import TEST_KEYS, Account
from .config import SandboxConfig
from .faults import FaultConfig
from .runner import Sandbox, run_sandbox

__all__ = ["SandboxConfig", "Account", "FaultConfig", "Sandbox", "run_sandbox", "TEST_KEYS"]
