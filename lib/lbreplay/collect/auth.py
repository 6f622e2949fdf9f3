"""Client authentication as Pulsar's clients spell it (``pulsar-admin`` / ``client.conf``):
``--auth-plugin`` + ``--auth-params``, ``--tls-trust-cert-path``, ``--tls-allow-insecure``.

Supported plugins: ``org.apache.pulsar.client.impl.auth.AuthenticationToken`` (params ``token:<jwt>``,
``file:///path/to/token`` or the bare token) and ``org.apache.pulsar.client.impl.auth.AuthenticationTls``
(params ``tlsCertFile:<path>,tlsKeyFile:<path>``, or the JSON form). Secrets are never logged: ``describe()``
names the plugin and where the secret came from, never its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lbreplay.errors import UsageError

TOKEN_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "AuthenticationToken", "token")
TLS_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationTls", "AuthenticationTls", "tls")


def _params(text: str) -> dict[str, str]:
    """``k1:v1,k2:v2`` or a JSON object -> dict (Pulsar's ``AuthenticationUtil.configureFromPulsar1AuthParamString``)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--auth-params: invalid JSON ({exc.msg})") from None
        return {str(k): str(v) for k, v in obj.items()}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class ClientAuth:
    """What the admin REST calls, the Pulsar client and ZooKeeper need; built from the CLI flags."""

    plugin: str | None = None
    token: str | None = None
    token_source: str | None = None  # "inline" or the file path (for messages; never the token)
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_trust_cert_path: str | None = None
    tls_allow_insecure: bool = False

    @staticmethod
    def from_flags(plugin: str | None, params: str | None, trust: str | None = None,
                   allow_insecure: bool = False) -> ClientAuth:
        if not plugin:
            if params:
                raise UsageError("--auth-params needs --auth-plugin")
            return ClientAuth(tls_trust_cert_path=trust, tls_allow_insecure=allow_insecure)
        if plugin in TOKEN_PLUGINS:
            raw = (params or "").strip()
            if raw.startswith("token:"):
                token, source = raw[len("token:"):], "inline"
            elif raw.startswith("file:"):
                path = urlsplit(raw).path if raw.startswith("file://") else raw[len("file:"):]
                try:
                    token, source = Path(path).read_text(encoding="utf-8").strip(), path
                except OSError as exc:
                    raise UsageError(f"--auth-params: cannot read the token file {path}: {exc.strerror}") from None
            elif raw:
                token, source = raw, "inline"
            else:
                raise UsageError("--auth-params: AuthenticationToken needs token:<jwt> or file:///path")
            return ClientAuth(plugin="token", token=token, token_source=source, tls_trust_cert_path=trust,
                              tls_allow_insecure=allow_insecure)
        if plugin in TLS_PLUGINS:
            p = _params(params or "")
            cert, key = p.get("tlsCertFile"), p.get("tlsKeyFile")
            if not cert or not key:
                raise UsageError("--auth-params: AuthenticationTls needs tlsCertFile:<path>,tlsKeyFile:<path>")
            return ClientAuth(plugin="tls", tls_cert_file=cert, tls_key_file=key, tls_trust_cert_path=trust,
                              tls_allow_insecure=allow_insecure)
        raise UsageError(f"--auth-plugin {plugin!r}: supported are AuthenticationToken and AuthenticationTls")

    def describe(self) -> str:
        """For logs: the plugin and the secret's source, never the secret."""
        if self.plugin == "token":
            return f"token ({'inline' if self.token_source in (None, 'inline') else f'from {self.token_source}'})"
        if self.plugin == "tls":
            return f"tls client certificate {self.tls_cert_file}"
        return "none"

    def requests_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``requests`` (headers, client cert, CA bundle / verify)."""
        kw: dict[str, Any] = {"headers": {}}
        if self.token:
            kw["headers"]["Authorization"] = f"Bearer {self.token}"
        if self.tls_cert_file and self.tls_key_file:
            kw["cert"] = (self.tls_cert_file, self.tls_key_file)
        if self.tls_allow_insecure:
            kw["verify"] = False
        elif self.tls_trust_cert_path:
            kw["verify"] = self.tls_trust_cert_path
        return kw

    def pulsar_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pulsar.Client`` (PyPI ``pulsar-client``)."""
        import pulsar

        kw: dict[str, Any] = {}
        if self.token:
            kw["authentication"] = pulsar.AuthenticationToken(self.token)
        elif self.tls_cert_file and self.tls_key_file:
            kw["authentication"] = pulsar.AuthenticationTLS(self.tls_cert_file, self.tls_key_file)
        if self.tls_trust_cert_path:
            kw["tls_trust_certs_file_path"] = self.tls_trust_cert_path
        if self.tls_allow_insecure:
            kw["tls_allow_insecure_connection"] = True
        return kw

    def __repr__(self) -> str:  # never print the token
        return f"ClientAuth({self.describe()})"
