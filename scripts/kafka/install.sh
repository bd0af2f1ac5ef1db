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
. scripts/debian_tool.sh
debian_tool "kafka install" java openjdk-17-jre-headless
debian_tool "kafka install" mvn maven
echo "kafka install: Apache Kafka $version from Maven Central into $libs (~60 MB the first time)" >&2
rm -rf "$libs"
mkdir -p "$libs"
mvn -B -q -f scripts/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$libs" >&2
ls "$libs"/kafka_2.13-"$version".jar "$libs"/connect-runtime-"$version".jar "$libs"/connect-file-"$version".jar \
    "$libs"/kafka-streams-"$version".jar >/dev/null
echo "$digest" >"$libs/.complete"
