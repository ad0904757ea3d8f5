"""Interop with the JVM classes Kafka 0.7 itself uses: GZIP streams, snappy-java, hashCode.

One JVM run (Java 17 single-file source mode, ~1 s) compresses, decompresses and hashes the
same inputs we do; the test then checks byte-for-byte agreement both ways.  snappy-java comes
from Debian's /usr/share/java (1.1.8, whose SnappyOutputStream still writes the 1.0.4.1
xerial header and 32 KiB blocks that Kafka 0.7.2 shipped with).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from zkconsumer.protocol import (
    Compression,
    compress,
    decode_message_set,
    decompress,
    encode_message_set,
    java_string_hashcode,
)
from zkconsumer.protocol.compression import XERIAL_HEADER

SNAPPY_JAR = "/usr/share/java/snappy-java.jar"

JAVA = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.zip.*;
import org.xerial.snappy.*;

public class Interop {
    static byte[] readAll(InputStream in) throws IOException { return in.readAllBytes(); }
    public static void main(String[] args) throws Exception {
        for (String task : args) {
            String[] t = task.split(";");
            byte[] in = Files.readAllBytes(Paths.get(t[1]));
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            switch (t[0]) {
                case "gzip-out": {  // as kafka.message.CompressionUtils does: one write, close
                    GZIPOutputStream z = new GZIPOutputStream(out); z.write(in); z.close(); break;
                }
                case "gzip-in": out.write(readAll(new GZIPInputStream(new ByteArrayInputStream(in)))); break;
                case "snappy-out": {
                    SnappyOutputStream s = new SnappyOutputStream(out); s.write(in); s.close(); break;
                }
                case "snappy-in": out.write(readAll(new SnappyInputStream(new ByteArrayInputStream(in)))); break;
                case "hash": {
                    StringBuilder b = new StringBuilder();
                    for (String line : new String(in, StandardCharsets.UTF_8).split("\n", -1))
                        b.append(line.hashCode()).append('\n');
                    out.write(b.toString().getBytes(StandardCharsets.UTF_8)); break;
                }
                default: throw new IllegalArgumentException(t[0]);
            }
            Files.write(Paths.get(t[2]), out.toByteArray());
        }
    }
}
"""

rng = random.Random(11)
INPUTS = {
    "empty": b"",
    "small": b"hello kafka 0.7",
    "text": b"".join(b"message number %d with some text; " % i for i in range(3000)),
    "random": bytes(rng.getrandbits(8) for _ in range(70_000)),
    "messageset": encode_message_set([b"payload-%d" % i for i in range(500)]),
}
KEYS = ["", "a", "key-1", "user-42", "polygenelubricants", "caf\u00e9", "\u4e2d\u6587",
        "emoji \U0001f600", "Aa", "BB"] + [f"k{i}-{rng.random()}" for i in range(50)]


@pytest.fixture(scope="module")
def jvm() -> Iterator[Path]:
    """Run every JVM task once; yields the directory holding inputs and outputs.

    A private TemporaryDirectory rather than tmp_path_factory: concurrent pytest runs of the
    same user prune each other's numbered basetemp directories.
    """
    java = shutil.which("java")
    assert java is not None, "Java 17 is part of the test environment"
    assert os.path.exists(SNAPPY_JAR), "snappy-java is part of the test environment"
    with tempfile.TemporaryDirectory(prefix="zkc-jvm-") as tmp:
        yield _run_jvm(java, Path(tmp))


def _run_jvm(java: str, work: Path) -> Path:
    (work / "Interop.java").write_text(JAVA)
    tasks = []
    for name, data in INPUTS.items():
        (work / f"{name}.raw").write_bytes(data)
        (work / f"{name}.ours.gz").write_bytes(compress(Compression.GZIP, data))
        (work / f"{name}.ours.snappy").write_bytes(compress(Compression.SNAPPY, data))
        tasks += [f"gzip-out;{work}/{name}.raw;{work}/{name}.java.gz",
                  f"gzip-in;{work}/{name}.ours.gz;{work}/{name}.gz.back",
                  f"snappy-out;{work}/{name}.raw;{work}/{name}.java.snappy",
                  f"snappy-in;{work}/{name}.ours.snappy;{work}/{name}.snappy.back"]
    (work / "keys.txt").write_bytes("\n".join(KEYS).encode())
    tasks.append(f"hash;{work}/keys.txt;{work}/keys.hash")
    subprocess.run([java, "-Djava.io.tmpdir=" + str(work), "-cp", SNAPPY_JAR,
                    str(work / "Interop.java"), *tasks],
                   check=True, capture_output=True, timeout=120)
    return work


@pytest.mark.parametrize("name", list(INPUTS))
def test_gzip_interop(jvm: Path, name: str) -> None:
    data = INPUTS[name]
    assert (jvm / f"{name}.gz.back").read_bytes() == data  # Java reads ours
    theirs = (jvm / f"{name}.java.gz").read_bytes()
    assert decompress(Compression.GZIP, theirs) == data  # we read Java's
    # Same header, except the OS byte: JDK 16+ writes 255 (JDK-8244706); the JDK 6-8 that
    # ran Kafka 0.7 wrote 0, which is what we write.
    ours = compress(Compression.GZIP, data)
    assert theirs[:9] == ours[:9]
    assert (theirs[9], ours[9]) == (0xFF, 0x00)


def test_gzip_output_is_byte_identical_to_java(jvm: Path) -> None:
    """Same zlib underneath, level 6, same framing: the bytes match the JVM's exactly
    (apart from the OS header byte, see above)."""
    for name, data in INPUTS.items():
        theirs = bytearray((jvm / f"{name}.java.gz").read_bytes())
        theirs[9] = 0
        assert bytes(theirs) == compress(Compression.GZIP, data), name


@pytest.mark.parametrize("name", list(INPUTS))
def test_snappy_interop(jvm: Path, name: str) -> None:
    data = INPUTS[name]
    assert (jvm / f"{name}.snappy.back").read_bytes() == data  # snappy-java reads ours
    theirs = (jvm / f"{name}.java.snappy").read_bytes()
    assert theirs[:16] == XERIAL_HEADER
    assert decompress(Compression.SNAPPY, theirs) == data  # we read snappy-java's


def test_java_wrapper_payload_decodes(jvm: Path) -> None:
    """A wrapper whose payload came from the JVM's GZIPOutputStream, as a 0.7 producer sends."""
    from zkconsumer.protocol import encode_message

    for suffix, codec in ((".java.gz", Compression.GZIP), (".java.snappy", Compression.SNAPPY)):
        wrapper = encode_message((jvm / f"messageset{suffix}").read_bytes(), compression=codec)
        decoded = decode_message_set(wrapper)
        assert [m[2] for m in decoded.messages] == [b"payload-%d" % i for i in range(500)]


def test_string_hashcode_matches_java(jvm: Path) -> None:
    hashes = [int(x) for x in (jvm / "keys.hash").read_text().split()]
    assert hashes == [java_string_hashcode(k) for k in KEYS]


def test_snappy_output_is_byte_identical_to_snappy_java(jvm: Path) -> None:
    """Framing is ours; block bytes come from the snappy library.  With python-snappy 0.7
    (cramjam) and snappy-java 1.1.8 they coincide -- if a library upgrade changes the
    compressor this may start failing while decoding both ways (above) still works."""
    for name, data in INPUTS.items():
        assert (jvm / f"{name}.java.snappy").read_bytes() == compress(Compression.SNAPPY,
                                                                      data), name
