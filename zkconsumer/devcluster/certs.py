"""Throw-away TLS certificates for the secured dev ZooKeeper, made with the ``openssl`` CLI.

``zkconsumer dev-cluster --zk-tls`` and the security tests need a CA, a server certificate
for 127.0.0.1/localhost and a client certificate, all PEM (ZooKeeper 3.8 reads PEM key and
trust stores with ``ssl.keyStore.type=PEM``, Python's ``ssl`` reads PEM): generating them at
start means no key material is ever committed and every cluster has its own CA.

The ``openssl`` command line is used instead of a Python crypto library so that no new
dependency is needed (Debian ships openssl wherever it ships a JRE).

Invariants: private keys are written with mode 0600; every certificate is signed by the CA
of its `CertificateAuthority` (``expired=True`` makes one that expired yesterday, for tests
of the "expired credential" error); nothing here talks to the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from zkconsumer.errors import ConfigurationError

__all__ = ["CertificateAuthority", "KeyPair"]


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate, its PEM private key, and both in one file (ZooKeeper's PEM store)."""

    cert: Path
    key: Path
    combined: Path


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise ConfigurationError("the openssl command is needed to generate dev certificates "
                                 "(Debian: apt-get install openssl)")
    proc = subprocess.run([exe, *args], cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        raise ConfigurationError(f"openssl {args[0]} failed: {tail[0]}")


def _private(path: Path) -> None:
    os.chmod(path, 0o600)


class CertificateAuthority:
    """A self-signed CA in ``directory`` (``<name>-ca.pem`` / ``<name>-ca.key``) that signs
    server and client certificates into the same directory."""

    def __init__(self, directory: Path | str, name: str = "zkconsumer-dev") -> None:
        self.directory = Path(directory).absolute()
        self.name = name
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cert = self.directory / f"{name}-ca.pem"
        self.key = self.directory / f"{name}-ca.key"
        if not self.cert.exists():
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(self.key),
                     "-out", str(self.cert), "-days", "30", "-subj", f"/CN={name} test CA",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.directory)
            _private(self.key)

    def issue(self, stem: str, common_name: str, *, server: bool = False,
              expired: bool = False) -> KeyPair:
        """Sign a new key pair ``<stem>.pem``/``<stem>.key`` (and ``<stem>-store.pem``).

        ``server=True`` adds the subject alternative names 127.0.0.1 and localhost (TLS
        hostname verification checks them); ``expired=True`` makes a certificate valid only
        in 2020.
        """
        d = self.directory
        key, csr, cert = d / f"{stem}.key", d / f"{stem}.csr", d / f"{stem}.pem"
        _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                 "-out", str(csr), "-subj", f"/CN={common_name}", cwd=d)
        _private(key)
        ext = d / f"{stem}.ext"
        usage = "serverAuth,clientAuth" if server else "clientAuth"
        lines = [f"extendedKeyUsage={usage}", "basicConstraints=CA:FALSE"]
        if server:
            lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
        ext.write_text("\n".join(lines) + "\n")
        if expired:
            self._sign_expired(csr, cert, ext)
        else:
            _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey",
                     str(self.key), "-CAcreateserial", "-out", str(cert), "-days", "30",
                     "-extfile", str(ext), cwd=d)
        combined = d / f"{stem}-store.pem"
        combined.write_text(cert.read_text() + key.read_text())
        _private(combined)
        csr.unlink(missing_ok=True)
        return KeyPair(cert, key, combined)

    def _sign_expired(self, csr: Path, cert: Path, ext: Path) -> None:
        # `openssl x509` cannot back-date; `openssl ca` can, given a minimal database.
        d = self.directory
        db = d / "ca-db"
        db.mkdir(exist_ok=True)
        (db / "index.txt").write_text("")
        (db / "serial").write_text("1000\n")
        conf = d / "ca-expired.cnf"
        conf.write_text(
            "[ca]\ndefault_ca=dev\n[dev]\n"
            f"database={db / 'index.txt'}\nserial={db / 'serial'}\nnew_certs_dir={db}\n"
            f"certificate={self.cert}\nprivate_key={self.key}\ndefault_md=sha256\n"
            "policy=any\nunique_subject=no\ncopy_extensions=none\n"
            "[any]\ncommonName=supplied\n")
        _openssl("ca", "-batch", "-config", str(conf), "-in", str(csr), "-out", str(cert),
                 "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
                 "-extfile", str(ext), "-notext", cwd=d)
