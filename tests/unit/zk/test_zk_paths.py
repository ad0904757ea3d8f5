"""Znode paths and value formats, byte-for-byte against what Scala 0.7.2 writes."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.errors import ConfigurationError, LocalProtocolError, ZnodeDataError
from zkconsumer.zk import paths as P
from zkconsumer.zk.paths import BrokerInfo, TopicCount

# ------------------------------------------------------------------------------ paths


def test_paths_are_the_scala_layout() -> None:
    assert P.BROKER_IDS == "/brokers/ids"
    assert P.BROKER_TOPICS == "/brokers/topics"
    assert P.CONSUMERS == "/consumers"
    assert P.broker_id_path(3) == "/brokers/ids/3"
    assert P.topic_path("t") == "/brokers/topics/t"
    assert P.topic_broker_path("t", 3) == "/brokers/topics/t/3"
    assert P.group_path("g") == "/consumers/g"
    assert P.consumer_ids_path("g") == "/consumers/g/ids"
    assert P.consumer_id_path("g", "g_c") == "/consumers/g/ids/g_c"
    assert P.owners_path("g") == "/consumers/g/owners"
    # the scaladoc says /owner/, the code writes /owners/
    assert P.owners_topic_path("g", "t") == "/consumers/g/owners/t"
    assert P.owner_path("g", "t", "1-0") == "/consumers/g/owners/t/1-0"
    assert P.offsets_path("g") == "/consumers/g/offsets"
    assert P.offsets_topic_path("g", "t") == "/consumers/g/offsets/t"
    assert P.offset_path("group1", "topic1", "1-0") == "/consumers/group1/offsets/topic1/1-0"


# ------------------------------------------------------------------------------ brokers


def test_broker_value_is_creator_host_port() -> None:
    # the example in ConsumerOffsetChecker.scala
    info = BrokerInfo(0, "127.0.0.1-1315436360737", "127.0.0.1", 9092)
    assert info.encode() == b"127.0.0.1-1315436360737:127.0.0.1:9092"
    assert info.zk_string == "127.0.0.1-1315436360737:127.0.0.1:9092"
    assert info.address == "127.0.0.1:9092"
    assert P.parse_broker_info(0, info.encode()) == info


def test_broker_create_builds_creator_id_from_host_and_millis() -> None:
    info = BrokerInfo.create(5, "10.0.0.7", 9093, now_ms=1349913524612)
    assert info.encode() == b"10.0.0.7-1349913524612:10.0.0.7:9093"
    assert P.make_creator_id("h", 12) == "h-12"


@pytest.mark.parametrize(("raw", "creator", "host"), [
    (b"::1-123:::1:9092", "::1-123", "::1"),                  # IPv6 host, Scala cannot
    (b"my-host-1:my-host:9092", "my-host-1", "my-host"),       # dashes in the host name
    (b"0:localhost:9092", "0", "localhost"),                   # ZkUtils.setupPartition style
    (b"x:y:z:h:1", "x:y:z", "h"),                              # odd creator: last two fields
])
def test_broker_parse_is_lenient_about_colons(raw: bytes, creator: str, host: str) -> None:
    info = P.parse_broker_info("7", raw)
    assert (info.id, info.creator_id, info.host) == (7, creator, host)


@pytest.mark.parametrize("raw", [
    None, b"", b"127.0.0.1:9092", b"c:h:", b"c:h:port", b"c:h:-1", b"c:h:65536", b":h:1",
    b"c::1", b"c:h: 9092", b"\xff\xfe:h:1",
])
def test_broker_parse_rejects_garbage(raw: bytes | None) -> None:
    with pytest.raises(ZnodeDataError) as err:
        P.parse_broker_info(2, raw)
    assert err.value.path == "/brokers/ids/2"
    assert err.value.data == raw


@pytest.mark.parametrize("name", ["x", "", "-1", "1.0", " 1", "99999999999"])
def test_broker_id_child_names_must_be_ints(name: str) -> None:
    with pytest.raises(ZnodeDataError):
        P.parse_broker_id(name)
    with pytest.raises(ZnodeDataError):
        P.parse_broker_info(name, b"c:h:1")


# ------------------------------------------------------------------------------ counts, offsets


def test_partition_count_and_offset_are_plain_decimal() -> None:
    assert P.encode_partition_count(4) == b"4"
    assert P.parse_partition_count("/p", b"4") == 4
    assert P.parse_partition_count("/p", b"007") == 7
    assert P.encode_offset(286894308) == b"286894308"
    assert P.encode_offset(0) == b"0"
    assert P.parse_offset("/o", b"286894308") == 286894308
    assert P.parse_offset("/o", str(2**63 - 1).encode()) == 2**63 - 1


@pytest.mark.parametrize("raw", [None, b"", b"-1", b"1.5", b"4 ", b" 4", b"+4", b"0x10", b"1_0",
                                 b"\xd9\xa1", b"abc", str(2**31).encode()])
def test_partition_count_rejects_garbage(raw: bytes | None) -> None:
    with pytest.raises(ZnodeDataError) as err:
        P.parse_partition_count("/brokers/topics/t/0", raw)
    assert err.value.path == "/brokers/topics/t/0"


@pytest.mark.parametrize("raw", [None, b"", b"-5", b"12a", b"1e3", b"\n", str(2**63).encode()])
def test_offset_rejects_empty_negative_and_non_numeric(raw: bytes | None) -> None:
    with pytest.raises(ZnodeDataError):
        P.parse_offset("/consumers/g/offsets/t/0-0", raw)


@pytest.mark.parametrize("bad", [-1, 2**63, True, 1.0, "5"])
def test_encoders_refuse_values_scala_cannot_read(bad: object) -> None:
    with pytest.raises(LocalProtocolError):
        P.encode_offset(bad)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        P.encode_partition_count(bad if bad != 2**63 else 2**31)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_offset_round_trip(n: int) -> None:
    assert P.parse_offset("/o", P.encode_offset(n)) == n


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_partition_count_round_trip(n: int) -> None:
    assert P.parse_partition_count("/p", P.encode_partition_count(n)) == n


# ------------------------------------------------------------------------------ partition names


def test_partition_name() -> None:
    assert P.partition_name(1, 0) == "1-0"
    assert P.parse_partition_name("10-3") == (10, 3)


@pytest.mark.parametrize("bad", ["", "1", "1-0-2", "a-0", "1-b", "-1-0", "1--0", "1-", " 1-0"])
def test_partition_name_needs_exactly_two_ints(bad: str) -> None:
    with pytest.raises(ZnodeDataError):
        P.parse_partition_name(bad, path="/x")


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_partition_name_round_trip(b: int, p: int) -> None:
    assert P.parse_partition_name(P.partition_name(b, p)) == (b, p)


# ------------------------------------------------------------------------------ consumer ids


def test_consumer_id_format() -> None:
    cid = P.make_consumer_id("group1", host="myhost.example.com", now_ms=1349913524612,
                             uuid_hex="7a3c2f1e-0000-4000-8000-000000000000")
    assert cid == "group1_myhost.example.com-1349913524612-7a3c2f1e"


def test_consumer_id_drops_leading_zero_nibbles_like_java_to_hex_string() -> None:
    # msb = 0x00000abcdef04123 -> toHexString "abcdef04123" -> substring(0, 8)
    cid = P.make_consumer_id("g", host="h", now_ms=1, uuid_hex="00000abcdef041238000000000000000")
    assert cid == "g_h-1-abcdef04"


def test_consumer_id_defaults_are_fresh_and_well_formed() -> None:
    a, b = P.make_consumer_id("g"), P.make_consumer_id("g")
    assert a != b
    assert re.fullmatch(r"g_.+-\d{13}-[0-9a-f]{8}", a)
    with pytest.raises(ConfigurationError):
        P.make_consumer_id("g", uuid_hex="not-a-uuid")


def test_thread_ids() -> None:
    assert P.thread_ids("group1_consumer1", 2) == ["group1_consumer1-0", "group1_consumer1-1"]
    assert P.thread_ids("c", {"t": 3, "u": 1}) == {"t": ["c-0", "c-1", "c-2"], "u": ["c-0"]}
    assert P.thread_ids("c", 0) == []


# ------------------------------------------------------------------------------ TopicCount


def test_static_topic_count_db_string_is_byte_exact() -> None:
    assert TopicCount.static({"topic1": 1}).encode() == b'{ "topic1": 1 }'
    # comma without a space, caller's (= Scala small-map insertion) order
    assert TopicCount.static({"t1": 2, "t2": 1}).encode() == b'{ "t1": 2,"t2": 1 }'
    assert TopicCount.static([("b", 1), ("a", 3)]).encode() == b'{ "b": 1,"a": 3 }'
    assert TopicCount.static({}).encode() == b"{  }"


def test_wildcard_topic_count_db_string() -> None:
    assert TopicCount.wildcard(True, 4, "whitetopic.*").encode() == b"*4*whitetopic.*"
    assert TopicCount.wildcard(False, 4, "blacktopic.*").encode() == b"!4!blacktopic.*"
    # the regex is stored normalised
    assert TopicCount.wildcard(True, 1, ' "a, b" ').encode() == b"*1*a|b"


@pytest.mark.parametrize(("raw", "norm"), [
    ("a,b", "a|b"), (" a , b ", "a|b"), ('"a.*"', "a.*"), ("'x'", "x"), ("\"'x'\"", "x"),
    ("\t a b \n", "ab"), ("a|b", "a|b"), ("", ""),
])
def test_normalize_topic_filter(raw: str, norm: str) -> None:
    assert P.normalize_topic_filter(raw) == norm
    assert P.normalize_topic_filter(norm) == norm


def test_static_topic_count_refuses_unencodable_input() -> None:
    with pytest.raises(LocalProtocolError):
        TopicCount.static({'a"b': 1}).encode()
    with pytest.raises(ConfigurationError):
        TopicCount.static({"t": 0})
    with pytest.raises(ConfigurationError):
        TopicCount.static({"": 1})
    with pytest.raises(ConfigurationError):
        TopicCount.wildcard(True, 1, "a(")
    with pytest.raises(ConfigurationError):
        TopicCount.wildcard(True, 0, "a")


def test_parse_static_accepts_any_integer_json_object() -> None:
    tc = P.parse_topic_count("/i", b'{ "t1": 2,"t2": 1 }')
    assert tc.counts == (("t1", 2), ("t2", 1))
    assert not tc.is_wildcard
    assert P.parse_topic_count("/i", b'{"t1":2}').counts == (("t1", 2),)
    assert P.parse_topic_count("/i", b"{}").counts == ()
    # brod writes json.dumps({topic: 1})
    assert P.parse_topic_count("/i", b'{"topic": 1}').topic_counts() == {"topic": 1}


def test_parse_wildcard() -> None:
    tc = P.parse_topic_count("/i", b"*4*whitetopic.*")
    assert (tc.is_wildcard, tc.whitelist, tc.num_streams, tc.pattern) == \
        (True, True, 4, "whitetopic.*")
    tc = P.parse_topic_count("/i", b"!2!black.*")
    assert (tc.whitelist, tc.num_streams, tc.pattern) == (False, 2, "black.*")


@pytest.mark.parametrize("raw", [
    None, b"", b"topic", b'{"t": 2.0}', b'{"t": true}', b'{"t": -1}', b'{"t": "2"}',
    b'{"t": null}', b'{"t": NaN}', b'{"t": 1e2}', b"[1]", b"null", b'"t"', b"{", b"\xff",
    b'{"t": 3000000000}', b"*x*abc", b"*4!abc", b"!4*abc", b"*4*a(", b"*", b"!!",
    b"[" * 5000,
])
def test_parse_topic_count_rejects_garbage(raw: bytes | None) -> None:
    with pytest.raises(ZnodeDataError) as err:
        P.parse_topic_count("/consumers/g/ids/c", raw)
    assert err.value.path == "/consumers/g/ids/c"


def test_wildcard_matching_is_full_match_and_blacklist_inverts() -> None:
    topics = ["whitetopic", "white", "xwhitetopic", "black1", "other"]
    white = TopicCount.wildcard(True, 2, "white.*")
    assert white.topic_counts(topics) == {"whitetopic": 2, "white": 2}
    assert not TopicCount.wildcard(True, 1, "white").allows("whitetopic")
    black = TopicCount.wildcard(False, 1, "black.*,white.*")
    assert black.topic_counts(topics) == {"xwhitetopic": 1, "other": 1}
    assert white.thread_ids_per_topic("c", ["white", "black1"]) == {"white": ["c-0", "c-1"]}


def test_static_thread_ids_ignore_the_topic_list() -> None:
    tc = TopicCount.static({"t": 2})
    assert tc.thread_ids_per_topic("g_c", ["other"]) == {"t": ["g_c-0", "g_c-1"]}
    assert tc.allows("t") and not tc.allows("u")


_TOPIC = st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=40)


@given(st.lists(st.tuples(_TOPIC, st.integers(1, 2**31 - 1)), max_size=6,
                unique_by=lambda kv: kv[0]))
def test_static_round_trip(items: list[tuple[str, int]]) -> None:
    tc = TopicCount.static(items)
    assert P.parse_topic_count("/i", tc.encode()) == tc


@given(st.booleans(), st.integers(1, 1000),
       st.text(alphabet=string.ascii_letters + string.digits + ".*|+?", min_size=1, max_size=30))
def test_wildcard_round_trip(whitelist: bool, n: int, regex: str) -> None:
    try:
        tc = TopicCount.wildcard(whitelist, n, regex)
    except ConfigurationError:
        return  # not a valid regex (e.g. "**")
    assert P.parse_topic_count("/i", tc.encode()) == tc


_HOST = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True),
    st.ip_addresses().map(str),
)


@given(st.integers(0, 2**31 - 1), _HOST, st.integers(0, 2**45), st.integers(0, 65535))
def test_broker_round_trip(bid: int, host: str, millis: int, port: int) -> None:
    info = BrokerInfo.create(bid, host, port, now_ms=millis)
    assert P.parse_broker_info(bid, info.encode()) == info
    assert P.parse_broker_info(str(bid), info.encode()) == info
