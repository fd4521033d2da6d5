"""SaslHandshake and SaslAuthenticate: the Kafka side of a connection's SASL exchange (KIP-43, KIP-152).

The versions are those kafka-python's classes define (SaslHandshake 0-1, SaslAuthenticate 0-2), which are also
Apache Kafka's. The exchange itself, and which requests a connection may send before it ends, is
`security.ConnectionAuth`'s; on a listener without SASL both APIs answer ILLEGAL_SASL_STATE, as Kafka does.
"""

from __future__ import annotations

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from ..security import ILLEGAL_SASL_STATE
from .dispatch import api


@api(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1)
async def sasl_handshake(broker, request, ctx):
    if ctx.auth is None:  # no connection state (a direct dispatch): nothing to authenticate
        return SaslHandshakeResponse[ctx.version](error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    code, mechanisms = ctx.auth.handshake(request.mechanism, ctx.version)
    return SaslHandshakeResponse[ctx.version](error_code=code, mechanisms=mechanisms)


@api(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2)
async def sasl_authenticate(broker, request, ctx):
    if ctx.auth is None:
        code, message, token = ILLEGAL_SASL_STATE, "no SASL exchange on this connection", b""
    else:
        code, message, token = ctx.auth.authenticate(bytes(request.auth_bytes))
    # No re-authentication is required (connections.max.reauth.ms unset): a session lifetime of 0.
    return SaslAuthenticateResponse[ctx.version](
        error_code=code, error_message=message, auth_bytes=token, session_lifetime_ms=0
    )
