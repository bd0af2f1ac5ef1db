#!/usr/bin/env bash
# Apache Kafka (the broker and its tools, KRaft; Kafka Connect's worker and FileStream connectors; Kafka
# Streams) from Maven Central into .peers/kafka-<version>/libs, by the coordinates in scripts/kafka/pom.xml,
# idempotently: the stamp .complete holds the pom's digest, so a changed pom installs again. Java 17 and
# Maven are Debian's (installed as root when missing). Used by `raftlog bench perf --compare kafka` and the
# tests that run Kafka (and a Connect worker, and a Kafka Streams application) beside raftlog.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml)
libs=.peers/kafka-$version/libs
digest=$(sha256sum scripts/kafka/pom.xml | cut -c1-16)
if [ "$(cat "$libs/.complete" 2>/dev/null)" = "$digest" ]; then
    exit 0
fi
for tool in java:openjdk-17-jre-headless mvn:maven; do
    command -v "${tool%%:*}" >/dev/null 2>&1 && continue
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "kafka install: ${tool%%:*} is missing; install it (apt-get install ${tool##*:}) and run again" >&2
        exit 1
    fi
    echo "kafka install: installing ${tool##*:} (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool##*:}" >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool##*:}" >/dev/null
    }
done
echo "kafka install: Apache Kafka $version from Maven Central into $libs (~60 MB the first time)" >&2
rm -rf "$libs"
mkdir -p "$libs"
mvn -B -q -f scripts/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$libs" >&2
ls "$libs"/kafka_2.13-"$version".jar "$libs"/connect-runtime-"$version".jar "$libs"/connect-file-"$version".jar \
    "$libs"/kafka-streams-"$version".jar >/dev/null
echo "$digest" >"$libs/.complete"
