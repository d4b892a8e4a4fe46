"""An XML-API front for fake-gcs-server, for sleet's tests.

object_store's GCS client writes through GCS's XML API (a PUT with
x-goog-if-generation-match, XML multipart uploads, x-goog-copy-source);
fake-gcs-server answers that API's reads but none of its writes. This
front takes those writes and makes them with the JSON API, whose
ifGenerationMatch fake-gcs-server applies atomically, and passes every
other request (reads, deletes, the JSON API itself) through unchanged. It
also applies what fake-gcs-server ignores on XML reads: a listing's
start-after, and If-Match / If-None-Match on a GET (looked up first, so
not atomic; object_store's GCS client sends them only where a stale
answer is harmless).

Usage: gcs-xml-front.py <port> <fake-gcs-server base URL>
"""
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

PORT = int(sys.argv[1])
BACKEND = urllib.parse.urlsplit(sys.argv[2])
PARTS = tempfile.mkdtemp(prefix="gcs-xml-front-")
UPLOADS = {}  # upload id -> {part number: file path}
UPLOADS_LOCK = threading.Lock()
# Headers a hop sets for itself, never passed on.
HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


def backend(method, target, body=b"", headers=None):
    """One request to fake-gcs-server: (status, headers, body)."""
    connection = http.client.HTTPConnection(BACKEND.hostname, BACKEND.port, timeout=120)
    connection.connect()
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheaders(), response.read()
    finally:
        connection.close()


def quoted(name):
    return urllib.parse.quote(name, safe="")


class Front(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    # --- plumbing -------------------------------------------------------

    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        length = str(len(body))
        for name, value in headers:
            if name.lower() == "content-length" and self.command == "HEAD":
                length = value
            elif name.lower() not in HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def target(self):
        """(bucket, object name, query) of an XML-API path."""
        url = urllib.parse.urlsplit(self.path)
        bucket, _, name = url.path.lstrip("/").partition("/")
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        return urllib.parse.unquote(bucket), urllib.parse.unquote(name), query

    def passed_on_headers(self):
        return {k: v for k, v in self.headers.items() if k.lower() not in HOP}

    def pass_through(self, body=None):
        data = self.body() if body is None else body
        status, headers, data = backend(self.command, self.path, data, self.passed_on_headers())
        self.reply(status, headers, data)

    def is_json_api(self):
        return self.path.startswith(("/storage/v1/", "/upload/", "/download/"))

    # --- writes ---------------------------------------------------------

    def upload(self, bucket, name, data, generation_match):
        """Writes an object with the JSON API; (status, headers, body)."""
        query = {"uploadType": "multipart", "name": name}
        if generation_match is not None:
            query["ifGenerationMatch"] = generation_match
        boundary = "front" + uuid.uuid4().hex
        metadata = json.dumps({"name": name})
        payload = (
            f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{metadata}\r\n"
            f"--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        target = f"/upload/storage/v1/b/{quoted(bucket)}/o?" + urllib.parse.urlencode(query)
        return backend("POST", target, payload,
                       {"Content-Type": f"multipart/related; boundary={boundary}"})

    def written(self, status, data, xml=None):
        """Answers a write as the XML API would, from a JSON API reply."""
        if status != 200:
            return self.reply(status, [("Content-Type", "application/json")], data)
        written = json.loads(data)
        headers = [("ETag", '"%s"' % written.get("etag", "")),
                   ("x-goog-generation", str(written["generation"]))]
        self.reply(200, headers, xml(written).encode() if xml else b"")

    def do_PUT(self):
        if self.is_json_api():
            return self.pass_through()
        bucket, name, query = self.target()
        generation_match = self.headers.get("x-goog-if-generation-match")
        if "uploadId" in query:
            return self.put_part(query["uploadId"][0], int(query["partNumber"][0]))
        source = self.headers.get("x-goog-copy-source")
        if source:
            self.body()
            from_bucket, _, from_name = urllib.parse.unquote(source).lstrip("/").partition("/")
            target = (f"/storage/v1/b/{quoted(from_bucket)}/o/{quoted(from_name)}"
                      f"/copyTo/b/{quoted(bucket)}/o/{quoted(name)}")
            if generation_match is not None:
                target += "?ifGenerationMatch=" + generation_match
            status, _, data = backend("POST", target, b"", {"Content-Length": "0"})
            return self.written(status, data)
        status, _, data = self.upload(bucket, name, self.body(), generation_match)
        self.written(status, data)

    def put_part(self, upload, number):
        data = self.body()
        with UPLOADS_LOCK:
            parts = UPLOADS.get(upload)
        if parts is None:
            return self.reply(404, body=b"no such upload")
        path = os.path.join(PARTS, f"{upload}.{number}")
        with open(path, "wb") as f:
            f.write(data)
        with UPLOADS_LOCK:
            parts[number] = path
        self.reply(200, [("ETag", f'"{upload}-{number}"')])

    def do_POST(self):
        if self.is_json_api():
            return self.pass_through()
        bucket, name, query = self.target()
        if "uploads" in query:
            self.body()
            upload = uuid.uuid4().hex
            with UPLOADS_LOCK:
                UPLOADS[upload] = {}
            xml = ('<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                   f"<Bucket>{bucket}</Bucket><Key>{name}</Key><UploadId>{upload}</UploadId>"
                   "</InitiateMultipartUploadResult>")
            return self.reply(200, [("Content-Type", "application/xml")], xml.encode())
        if "uploadId" in query:
            return self.complete(bucket, name, query["uploadId"][0])
        self.pass_through()

    def complete(self, bucket, name, upload):
        wanted = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", self.body())]
        with UPLOADS_LOCK:
            parts = UPLOADS.pop(upload, None)
        if parts is None or any(n not in parts for n in wanted):
            return self.reply(400, body=b"unknown upload or part")
        data = b"".join(open(parts[n], "rb").read() for n in wanted)
        for path in parts.values():
            os.unlink(path)
        status, _, reply = self.upload(bucket, name, data,
                                       self.headers.get("x-goog-if-generation-match"))
        self.written(status, reply, lambda o: (
            '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
            f'<Bucket>{bucket}</Bucket><Key>{name}</Key><ETag>"{o.get("etag", "")}"</ETag>'
            "</CompleteMultipartUploadResult>"))

    def do_DELETE(self):
        if not self.is_json_api():
            _, _, query = self.target()
            if "uploadId" in query:
                with UPLOADS_LOCK:
                    parts = UPLOADS.pop(query["uploadId"][0], {})
                for path in parts.values():
                    os.unlink(path)
                return self.reply(204)
        self.pass_through()

    # --- reads ----------------------------------------------------------

    def do_GET(self):
        if self.is_json_api():
            return self.pass_through()
        _, name, query = self.target()
        if not name and "start-after" in query:
            return self.list_after(query["start-after"][0])
        if self.unmet_condition():
            return
        self.pass_through()

    def do_HEAD(self):
        if not self.is_json_api() and self.unmet_condition():
            return
        self.pass_through()

    def unmet_condition(self):
        """Answers 304 or 412 for an unmet If-None-Match / If-Match."""
        if_match = self.headers.get("If-Match")
        if_none_match = self.headers.get("If-None-Match")
        if not if_match and not if_none_match:
            return False
        status, headers, _ = backend("HEAD", self.path)
        etag = dict((k.lower(), v) for k, v in headers).get("etag")
        if status != 200:
            return False
        if if_match and if_match != etag:
            self.reply(412)
            return True
        if if_none_match and if_none_match == etag:
            self.reply(304, [("ETag", etag)])
            return True
        return False

    def list_after(self, start_after):
        status, headers, data = backend("GET", self.path)
        if status != 200:
            return self.reply(status, headers, data)
        namespace = re.match(rb"\s*(?:<\?xml[^>]*>)?\s*<[^ >]+ xmlns=\"([^\"]+)\"", data)
        ns = "{%s}" % namespace.group(1).decode() if namespace else ""
        if namespace:
            ET.register_namespace("", namespace.group(1).decode())
        root = ET.fromstring(data)
        for contents in root.findall(f"{ns}Contents"):
            key = contents.find(f"{ns}Key")
            if key is not None and key.text is not None and key.text <= start_after:
                root.remove(contents)
        self.reply(200, [("Content-Type", "application/xml")], ET.tostring(root))


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Front)
    server.daemon_threads = True
    try:
        server.serve_forever()
    finally:
        shutil.rmtree(PARTS, ignore_errors=True)


main()
