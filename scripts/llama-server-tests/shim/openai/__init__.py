"""A minimal stand-in for the `openai` Python client, used by scripts/llama-server-tests.sh
only where the real package is not installed (Debian has none). It covers what llama.cpp's
server tests call: OpenAI(api_key, base_url).completions.create and
.chat.completions.create, plain and streamed (server-sent events), and
.embeddings.create, which asks for base64 and decodes it to floats when the caller names
no encoding_format, as the real client does. Responses are JSON
objects read by attribute; a field the server left out reads as None, as the real
client's optional fields do. A non-2xx answer raises APIStatusError.
"""
import base64
import json
import struct

import requests

__all__ = ["OpenAI", "APIError", "APIStatusError"]


class APIError(Exception):
    pass


class APIStatusError(APIError):
    def __init__(self, status_code, body):
        super().__init__(f"HTTP {status_code}: {body}")
        self.status_code = status_code
        self.body = body


class _Obj:
    """Attribute view of a JSON object; lists of objects are wrapped too."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _wrap(self._data.get(name))

    def __getitem__(self, key):
        return _wrap(self._data[key])

    def model_dump(self):
        return self._data

    def __repr__(self):
        return f"_Obj({self._data!r})"


def _wrap(v):
    if isinstance(v, dict):
        return _Obj(v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class _Endpoint:
    def __init__(self, client, path):
        self._client = client
        self._path = path

    def create(self, **kwargs):
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        stream = bool(kwargs.get("stream"))
        resp = requests.post(self._client.base_url + self._path, json=kwargs,
                             headers=self._client._headers(), stream=stream,
                             timeout=self._client.timeout)
        if resp.status_code // 100 != 2:
            try:
                body = resp.json()
            except ValueError:
                body = resp.text
            raise APIStatusError(resp.status_code, body)
        if not stream:
            return _Obj(resp.json())
        return self._events(resp)

    @staticmethod
    def _events(resp):
        for line in resp.iter_lines(decode_unicode=True):
            if not line or not line.startswith("data:"):
                continue
            payload = line[len("data:"):].strip()
            if payload == "[DONE]":
                return
            yield _Obj(json.loads(payload))


class _Embeddings(_Endpoint):
    def create(self, **kwargs):
        decode = "encoding_format" not in kwargs
        if decode:
            kwargs["encoding_format"] = "base64"
        res = super().create(**kwargs)
        if decode:
            for d in res._data.get("data") or []:
                raw = base64.b64decode(d["embedding"])
                d["embedding"] = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        return res


class _Chat:
    def __init__(self, client):
        self.completions = _Endpoint(client, "/chat/completions")


class OpenAI:
    def __init__(self, api_key=None, base_url=None, timeout=600, **_):
        self.api_key = api_key
        self.base_url = (base_url or "http://127.0.0.1:8080/v1").rstrip("/")
        self.timeout = timeout
        self.completions = _Endpoint(self, "/completions")
        self.chat = _Chat(self)
        self.embeddings = _Embeddings(self, "/embeddings")

    def _headers(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
