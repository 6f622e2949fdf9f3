"""Client auth flags as Pulsar's clients spell them; a secret never appears in what is logged."""

from __future__ import annotations

from pathlib import Path

import pytest
from lbreplay.collect.auth import ClientAuth
from lbreplay.errors import UsageError

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"


def test_token_inline_and_file(tmp_path: Path) -> None:
    a = ClientAuth.from_flags(TOKEN_PLUGIN, "token:s3cr3t.jwt")
    assert a.requests_kwargs()["headers"] == {"Authorization": "Bearer s3cr3t.jwt"}
    assert "s3cr3t" not in a.describe() and "s3cr3t" not in repr(a)
    f = tmp_path / "token"
    f.write_text("file-t0ken\n")
    b = ClientAuth.from_flags(TOKEN_PLUGIN, f"file://{f}")
    assert b.requests_kwargs()["headers"]["Authorization"] == "Bearer file-t0ken"
    assert str(f) in b.describe() and "file-t0ken" not in b.describe()


def test_tls_client_cert_and_trust() -> None:
    a = ClientAuth.from_flags(TLS_PLUGIN, "tlsCertFile:/c.pem,tlsKeyFile:/k.pem", trust="/ca.pem")
    kw = a.requests_kwargs()
    assert kw["cert"] == ("/c.pem", "/k.pem") and kw["verify"] == "/ca.pem"
    j = ClientAuth.from_flags(TLS_PLUGIN, '{"tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem"}', allow_insecure=True)
    assert j.requests_kwargs()["verify"] is False


@pytest.mark.parametrize("plugin,params,match", [
    (None, "token:x", "needs --auth-plugin"),
    (TOKEN_PLUGIN, "", "needs token"),
    (TOKEN_PLUGIN, "file:///nonexistent/token", "cannot read the token file"),
    (TLS_PLUGIN, "tlsCertFile:/c.pem", "tlsKeyFile"),
    ("org.example.Kerberos", "x", "supported are"),
])
def test_bad_flags(plugin: str | None, params: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        ClientAuth.from_flags(plugin, params)
