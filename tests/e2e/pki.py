"""Certificates for the end-to-end control plane: one CA, and the leaf certificates
the tests need (kube-apiserver's serving certificate, an admin client certificate,
the extender's serving certificate and kube-scheduler's client certificate for mutual
TLS), plus the service-account signing key. Everything is made fresh in a folder the
harness owns; nothing is read from the machine.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(parts)


class Pki:
    """A CA in `folder` that issues leaf certificates (and keeps them there)."""

    def __init__(self, folder: Path, name: str = "wasm-scheduler-e2e-ca") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._subject = _name(name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._subject).issuer_name(self._subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca = folder / f"{name}.crt"
        self.ca.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, file_stem: str, common_name: str, *, organizations: tuple[str, ...] = (),
              server_names: tuple[str, ...] = (), client: bool = False) -> KeyPair:
        """A leaf certificate signed by this CA: a server certificate for `server_names`
        (DNS names or IP addresses), a client one for `client`, or both."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations)).issuer_name(self._subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server_names:
            alternatives: list[x509.GeneralName] = []
            for entry in server_names:
                try:
                    alternatives.append(x509.IPAddress(ipaddress.ip_address(entry)))
                except ValueError:
                    alternatives.append(x509.DNSName(entry))
            builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.folder / f"{file_stem}.crt", self.folder / f"{file_stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair

    def service_account_key(self) -> Path:
        """An RSA key kube-apiserver signs and verifies service-account tokens with."""
        path = self.folder / "service-account.key"
        _write_key(rsa.generate_private_key(public_exponent=65537, key_size=2048), path)
        return path
