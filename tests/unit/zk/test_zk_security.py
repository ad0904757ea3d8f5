"""`ZkSecurity` and its builders, without a server: precedence, Java-client compatibility,
secrets kept out of reprs/options/logs, the ACL rule, and the same flags on every command."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest
from kazoo.protocol.serialization import Auth
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.cli import build_parser
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.errors import ConfigurationError
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.zk.security import KazooLog, Secret, TlsHandler, ZkAcl, ZkSecurity
from zkconsumer.zk.security_config import (
    add_zk_security_arguments,
    zk_security_flags,
    zk_security_from,
    zk_security_options,
)

SECRET = "s3cret-value-never-shown"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_zk_security_arguments(parser)
    return parser.parse_args(list(argv))


def test_secret_never_prints() -> None:
    sec = ZkSecurity(digest_user="alice", password=Secret(SECRET))
    for text in (repr(sec), str(sec), sec.describe(), sec.identity(), repr(sec.password)):
        assert SECRET not in text
    assert sec.describe() == "plain, digest:alice, acl=open"


def test_validation_up_front() -> None:
    with pytest.raises(ConfigurationError, match="needs an identity"):
        ZkSecurity(acl=ZkAcl.CREATOR)
    with pytest.raises(ConfigurationError, match="go together"):
        ZkSecurity(tls_cert="c.pem")
    with pytest.raises(ConfigurationError, match=r"zk\.acl"):
        ZkSecurity(acl="everyone")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"zk\.sasl\.mechanism"):
        ZkSecurity(sasl_user="a", sasl_mechanism="PLAIN")
    assert ZkSecurity(digest_user="a", acl="CREATOR").acl is ZkAcl.CREATOR  # type: ignore[arg-type]


def test_precedence_flag_then_properties_then_environment(tmp_path: Path) -> None:
    env = {"ZKCONSUMER_ZK_TLS_CA": "env-ca.pem", "ZKCONSUMER_ZK_DIGEST_USER": "env-user",
           "ZKCONSUMER_ZK_ACL": "creator"}
    props = {"zk.tls.ca": "props-ca.pem"}
    sec = zk_security_from(_args("--zk-tls-ca", "flag-ca.pem"), props, env)
    assert (sec.tls_ca, sec.digest_user, sec.acl) == ("flag-ca.pem", "env-user", ZkAcl.CREATOR)
    assert zk_security_from(_args(), props, env).tls_ca == "props-ca.pem"
    assert zk_security_from(_args(), {}, env).tls_ca == "env-ca.pem"
    assert zk_security_from(_args(), {}, {}) == ZkSecurity()
    assert zk_security_from(_args(), {}, {}).use_tls is False


def test_java_client_properties_and_jaas_file_work(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('Server { x required user_a="b"; };\n'
                    "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'  username="alice"\n  password="{SECRET}";\n}};\n')
    props = {"zookeeper.client.secure": "true", "zookeeper.ssl.keyStore.location": "me.pem",
             "zookeeper.ssl.keyStore.type": "PEM", "zookeeper.ssl.trustStore.location": "ca.pem",
             "zookeeper.ssl.hostnameVerification": "false",
             "java.security.auth.login.config": str(jaas)}
    sec = zk_security_from(None, props, {})
    assert (sec.tls, sec.tls_ca, sec.tls_cert, sec.tls_key) == (True, "ca.pem", "me.pem", "me.pem")
    assert sec.verify_hostname is False
    assert (sec.sasl_user, sec.sasl_mechanism, sec.password_text()) == ("alice", "DIGEST-MD5",
                                                                         SECRET)
    jaas.write_text('Client { com.sun.security.auth.module.Krb5LoginModule required '
                    'useKeyTab=true principal="zk-client@EXAMPLE.COM"; };\n')
    sec = zk_security_from(None, {"zk.sasl.jaas.file": str(jaas)}, {})
    assert (sec.sasl_mechanism, sec.sasl_principal) == ("GSSAPI", "zk-client@EXAMPLE.COM")


def test_jks_store_and_password_keys_are_refused_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match="reads PEM only"):
        zk_security_from(None, {"zookeeper.ssl.trustStore.location": "trust.jks"}, {})
    with pytest.raises(ConfigurationError, match="passwords are not accepted"):
        zk_security_from(None, {"zk.digest.password": SECRET}, {})


def test_password_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKCONSUMER_ZK_PASSWORD", raising=False)
    sec = ZkSecurity(digest_user="alice")
    with pytest.raises(ConfigurationError, match="--zk-password-file") as info:
        sec.kazoo_kwargs()
    assert "'alice'" in str(info.value)
    monkeypatch.setenv("ZKCONSUMER_ZK_PASSWORD", SECRET)
    assert sec.kazoo_kwargs()["auth_data"] == [("digest", f"alice:{SECRET}")]
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    assert ZkSecurity(digest_user="a", password_file=str(pw)).password_text() == "from-file"
    with pytest.raises(ConfigurationError, match="cannot read"):
        ZkSecurity(digest_user="a", password_file=str(tmp_path / "none")).password_text()


def test_kazoo_arguments() -> None:
    kw = ZkSecurity(tls=True).kazoo_kwargs()
    handler = kw.pop("handler")
    assert kw == {"use_ssl": True, "ca": None, "certfile": None, "keyfile": None,
                  "verify_certs": True, "check_hostname": True}
    assert isinstance(handler, TlsHandler) and handler._context.check_hostname
    kw = ZkSecurity(sasl_user="bob", password=Secret(SECRET), acl=ZkAcl.CREATOR).kazoo_kwargs()
    assert kw["sasl_options"] == {"mechanism": "DIGEST-MD5", "username": "bob",
                                  "password": SECRET}
    assert kw["default_acl"] == list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)
    with pytest.raises(ConfigurationError, match="GSSAPI needs"):
        ZkSecurity(sasl_user="x", sasl_mechanism="GSSAPI").kazoo_kwargs()


def test_acl_rule() -> None:
    open_ = ZkSecurity()
    assert open_.acl_for("/consumers/g/ids/x", container=False) == list(OPEN_ACL_UNSAFE)
    mine = ZkSecurity(digest_user="a", acl=ZkAcl.CREATOR)
    strict = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)
    for shared in ("/consumers", "/consumers/g", "/brokers/ids", "/brokers/topics"):
        assert mine.acl_for(shared, container=True) == list(OPEN_ACL_UNSAFE), shared
    for ours in ("/consumers/g/ids", "/consumers/g/offsets/t", "/brokers/topics/t"):
        assert mine.acl_for(ours, container=True) == strict, ours
    for leaf in ("/brokers/ids/0", "/consumers/g/ids/m", "/consumers/g/offsets/t/0-0"):
        assert mine.acl_for(leaf, container=False) == strict, leaf


def test_spark_options_and_child_flags_carry_no_secret(tmp_path: Path) -> None:
    sec = ZkSecurity(tls_ca="ca.pem", tls_cert="c.pem", tls_key="k.pem", sasl_user="alice",
                     password_file="/run/secrets/zk", verify_hostname=False, acl=ZkAcl.CREATOR)
    opts = zk_security_options(sec)
    assert zk_security_from(None, opts, {}) == sec  # an executor rebuilds the same settings
    assert zk_security_from(_args(*zk_security_flags(sec)), {}, {}) == sec
    with pytest.raises(ConfigurationError, match="cannot be sent to Spark executors"):
        zk_security_options(ZkSecurity(digest_user="a", password=Secret(SECRET)))


def test_kazoo_debug_log_never_shows_credentials(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kazoo.client")
    KazooLog().debug("Sending request(xid=%s): %s", 1, Auth(0, "digest", f"alice:{SECRET}"))
    assert SECRET not in caplog.text and "credentials not logged" in caplog.text


def test_configs_take_security_keys_without_warning(caplog: pytest.LogCaptureFixture) -> None:
    props = {"groupid": "g", "zk.connect": "h:1", "zk.digest.user": "alice", "zk.acl": "creator"}
    with caplog.at_level(logging.WARNING):
        cfg = ConsumerConfig.from_properties(props)
    assert "ignoring unknown" not in caplog.text
    assert cfg.zk_security == ZkSecurity(digest_user="alice", acl=ZkAcl.CREATOR)
    pcfg = ProducerConfig.from_properties({"zk.connect": "h:1", "zk.tls.ca": "ca.pem"})
    assert pcfg.zk_security.tls_ca == "ca.pem"
    bcfg = BrokerConfig.from_properties({"brokerid": "0", "log.dir": "/x", "zk.tls": "true"})
    assert bcfg.zk_security.use_tls and bcfg.bind == "127.0.0.1"


def test_every_zookeeper_command_has_the_same_security_flags() -> None:
    flags = {"--zk-tls-ca", "--zk-tls-cert", "--zk-tls-key", "--zk-sasl-user",
             "--zk-digest-user", "--zk-password-file", "--zk-acl"}
    seen = []
    stack = [("", build_parser())]
    while stack:
        name, parser = stack.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {n}".strip(), p) for n, p in action.choices.items()
                          if n != "bench"]
        if "--zk" in parser._option_string_actions and name != "dev-cluster":
            assert flags <= set(parser._option_string_actions), name
            seen.append(name)
    assert {"run", "produce", "group list", "group describe", "offsets export",
            "offsets import", "offsets reset", "mirror", "mirror verify", "mirror translate",
            "export", "broker"} <= set(seen), seen


@pytest.mark.parametrize(("warning", "expected"), [
    ("Connection dropped: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
     "certificate has expired (_ssl.c:1006)", "has expired: renew the server certificate"),
    ("Connection dropped: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
     "IP address mismatch, certificate is not valid for '10.0.0.9'. (_ssl.c:1006)",
     "does not name that host"),
    ("Connection dropped: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
     "self-signed certificate in certificate chain (_ssl.c:1006)",
     "is not trusted (self-signed certificate in certificate chain): give the CA"),
    ("Connection dropped: [SSL: SSLV3_ALERT_CERTIFICATE_EXPIRED] sslv3 alert certificate "
     "expired (_ssl.c:2580)", "rejected our client certificate c.pem: it has expired"),
    ("Connection dropped: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate "
     "required (_ssl.c:2580)", "refused our TLS client certificate"),
])
def test_each_tls_refusal_has_its_own_line(warning: str, expected: str) -> None:
    from zkconsumer.zk.security import explain_connect_failure

    sec = ZkSecurity(tls_ca="ca.pem", tls_cert="c.pem", tls_key="k.pem")
    text = explain_connect_failure([("zk1", 2281)], sec, [warning])
    assert text is not None and expected in text and "zk1:2281" in text, text
