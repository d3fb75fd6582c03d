"""Every message the sandbox answers with, in one place, and the error type handlers raise.

Messages quoted by the spec are copied word for word; the ones the spec leaves
"not shown" are our design (README, "Where the spec is silent").
"""
from __future__ import annotations

from http import HTTPStatus

# Authentication and plan gates.
MISSING_KEY = "Missing API key"
UNKNOWN_KEY = "User with this API key was not found or the API key is disabled"
INACTIVE_KEY = ("User with this API key is not active. "
                "Please update your billing details in the dashboard to reactivate it.")
BLOCKED_KEY = "This API key has been blocked, please contact support if you believe this is an error."
TIER_GATED = ("This API is not available for your current subscription tier. "
              "Please upgrade your plan to access this API.")
FEATURE_NOT_ENABLED = "This feature is not enabled for your account"

# Validation (400, no quota consumed).
MISSING_VIN = "Missing vin (vehicle identification number)"
WRONG_VIN_LENGTH = "Wrong VIN length, must be 17 characters"
INVALID_VIN = "Invalid VIN"
MISSING_PLATE = "Missing vehicle registration number or license plate number"
MISSING_STATE = "Missing 2 letter state code"
INVALID_STATE_OR_COUNTRY = "Invalid state or country code."
INVALID_CONDITION = "Invalid condition. Available conditions: excellent, clean, average, rough"
INVALID_MILEAGE = "Invalid mileage. Must be a number"
MISSING_IMAGE = "Missing image data"
INVALID_IMAGE = "Invalid image data format. Must be a valid URL or base64 encoded string."
MISSING_MAKE_MODEL = "Please supply a make and model..."
MISSING_YMM = "Missing required parameters"
INVALID_DIMENSION = "Invalid dimension. Must be one of: years, makes, models, trims, variants."
YMM_YEAR_FOR_MODEL = "The year parameter is required when filtering by model without make."
YMM_MAKE_FOR_MODELS = "The make parameter is required for dimension=models."
YMM_MODEL_FOR_TRIMS = "The model parameter is required for dimension=trims."
YMM_MODEL_FOR_VARIANTS = "The model parameter is required for dimension=variants unless both year and make are set."
MISSING_OBD_CODE = "Missing code parameter"
MISSING_PHONE = "Missing phone parameter"
INVALID_PHONE = "Invalid phone number. Must be a 10-digit US number"
TOO_MANY_PHONES = "A bulk request accepts at most 100 phone numbers"
MISSING_PHONES = "Request body must include phones (non-empty array of US numbers)"

# Not found (404, never billed).
NO_DATA_SPECS = "No data found for this VIN. Try a deep search by setting deepdata=1 in your request"
NO_DATA = "No data found for this VIN"
NO_PLATE_DATA = "Plate searches for this country have been disabled, or No data found for this plate"
NO_LIEN_THEFT = "No lien or theft data found for this VIN"
NO_IMAGES = "No images found"
NO_PLATES_IN_IMAGE = "No plates detected in image"
NO_VIN_CANDIDATES = "No valid VIN candidates found in the image"
NO_TEXT_IN_IMAGE = "No text detected in the image"
NO_YMM_DATA = "No data found for this year, make and model"
NOT_FOUND_ROUTE = "Not found"


def obd_not_found(code: str) -> str:
    return f"Could not find code {code}"


# Server and upstream.
INTERNAL = "Internal server error"
CV_001 = "Unable to authenticate internal request (code CV-001). Please try again later"
CV_002 = "Unable to authenticate internal request (code CV-002). Please try again later"
COULD_NOT_FETCH = "Could not fetch data"
NO_INTERNET = "Cannot access the internet at this time"
TIMED_OUT = "Request timed out. Please try again."
UPSTREAM_BY_STATUS = {500: INTERNAL, 502: COULD_NOT_FETCH, 503: NO_INTERNET, 504: TIMED_OUT}

# Ownership (body also carries vin, owners: [], error).
OWNERSHIP_NOT_ENABLED = "The Ownership API is not enabled for this API key."
OWNERSHIP_NO_DATA = "No ownership record exists for this VIN."
OWNERSHIP_PHONE_NO_DATA = "No ownership record exists for these phone numbers."
OWNERSHIP_UNAVAILABLE = "The Ownership API is temporarily unavailable."
# Ownership by person, address and ZIP: paths from the vendor's SDKs, messages our design.
MISSING_PERSON = "Missing required parameters: first_name, last_name, address, zip"
MISSING_ADDRESS = "Missing required parameters: address, zip"
MISSING_ZIP = "Missing required parameters: zip"
PERSON_TOO_LONG = "first_name and last_name take at most 50 characters, address at most 100"
INVALID_ZIP = "Invalid ZIP code. Must be a 5-digit US ZIP, optionally ZIP+4"
INVALID_ZIP_SEARCH = "Invalid ZIP code. Must be exactly 5 digits"
INVALID_GENDER = "Invalid gender. Must be M or F"
INVALID_AGE = "Invalid {name}. Must be a whole number"
AGE_RANGE = "min_age must not be greater than max_age"
INVALID_PAGE = "Invalid page. Must be a whole number from 1"
INVALID_LIMIT = "Invalid limit. Must be a whole number from 1 to 100"
OWNERSHIP_PERSON_NO_DATA = "No ownership record matches this person."
OWNERSHIP_ADDRESS_NO_DATA = "No ownership record exists for this address."
OWNERSHIP_ZIP_NO_DATA = "No ownership record matches this ZIP code and these filters."

# Credits.
AUTO_RECHARGE_PENDING = ("An automatic recharge of your prepaid balance is still processing. "
                         "Retry with backoff using the same idempotency key.")
BILLING_URL = "https://sandbox.vehicle-data.example/billing"

# Recalls batch.
BATCH_BODY_INVALID = ("Request body must include at least one of: vins (non-empty array), csv (text), "
                      "or csvUrl (https link to a CSV) with valid 17-character VINs.")
BATCH_TOO_MANY = "A batch may contain at most 10,000 VINs; this request has {count}."
BATCH_CSV_TOO_LARGE = "The CSV must be at most 5 MB."
BATCH_CSV_URL_NOT_HTTPS = "csvUrl must be an https:// link to a CSV file."
BATCH_CSV_DOWNLOAD = "Could not download the CSV from csvUrl: {reason}"
BATCH_WEBHOOK_NOT_HTTPS = "webhookUrl must be a valid https:// URL."
BATCH_X402_VINS_ONLY = "x402-paid submissions must use the vins array; csv and csvUrl need an API key."
BATCH_METHOD = "Method not allowed. Only POST is allowed for this endpoint."
BATCH_MISSING_ID = "Missing batchId parameter"
BATCH_NOT_FOUND = "Batch not found or you do not have access to this batch."
BATCH_NOT_COMPLETE = "Batch processing is not yet complete. Please check the status later."
BATCH_ACCEPTED = ("Batch accepted. Poll /v1/recalls-batch/status?batchId={batch_id} "
                  "or wait for the webhook.")

RETRY_AFTER_SECONDS = 60


class ApiError(Exception):
    """An error answer: status, message and the extra envelope fields the spec puts there."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None, **fields):
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = fields
        self.headers = dict(headers or {})

    def body(self) -> dict:
        return {"success": False, "message": self.message, **self.fields}


def upstream_error(status: int, message: str | None = None) -> ApiError:
    """The catalog's upstream failures: 502/503/504 are retryable and say when to come back. Another status (a fault
    set to refuse, say 400) answers with its HTTP reason phrase."""
    message = message or UPSTREAM_BY_STATUS.get(status) or HTTPStatus(status).phrase
    if status in (502, 503, 504):
        return ApiError(status, message, retryable=True, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    return ApiError(status, message)
