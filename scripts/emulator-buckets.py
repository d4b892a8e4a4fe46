"""Waits for the GCS and Azure emulators scripts/with-servers starts, then
creates the named buckets in one and containers in the other.

Usage: emulator-buckets.py <gcs-url> <azurite-url> <name>...

Azurite wants requests signed with Shared Key; its account and key are the
well-known emulator ones that object_store also uses."""
import base64
import email.utils
import hashlib
import hmac
import sys
import time
import urllib.error
import urllib.request

AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = base64.b64decode(
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_VERSION = "2021-08-06"


def wait_for(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except Exception:
            time.sleep(0.1)
    sys.exit(f"emulator-buckets: nothing answers at {url}")


def send(request):
    """Sends a request; an answer that the name already exists is fine."""
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as e:
        if e.code != 409:
            sys.exit(f"emulator-buckets: {request.full_url}: {e.code} {e.read()[:200]!r}")


def gcs_bucket(base, name):
    body = ('{"name": "%s"}' % name).encode()
    send(urllib.request.Request(
        f"{base}/storage/v1/b", data=body, method="POST",
        headers={"Content-Type": "application/json"}))


def azure_container(base, name):
    date = email.utils.formatdate(usegmt=True)
    # Shared Key string to sign: the verb, eleven empty standard headers,
    # the x-ms- headers, then the resource and its query.
    to_sign = "\n".join(
        ["PUT"] + [""] * 11
        + [f"x-ms-date:{date}", f"x-ms-version:{AZURE_VERSION}",
           f"/{AZURE_ACCOUNT}/{AZURE_ACCOUNT}/{name}\nrestype:container"])
    signature = base64.b64encode(
        hmac.new(AZURE_KEY, to_sign.encode(), hashlib.sha256).digest()).decode()
    send(urllib.request.Request(
        f"{base}/{AZURE_ACCOUNT}/{name}?restype=container", method="PUT",
        # No body: urllib would add a Content-Type, which is signed.
        headers={"Content-Length": "0", "x-ms-date": date, "x-ms-version": AZURE_VERSION,
                 "Authorization": f"SharedKey {AZURE_ACCOUNT}:{signature}"}))


def main():
    gcs, azure, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    wait_for(f"{gcs}/storage/v1/b")
    wait_for(f"{azure}/")
    for name in names:
        gcs_bucket(gcs, name)
        azure_container(azure, name)


main()
