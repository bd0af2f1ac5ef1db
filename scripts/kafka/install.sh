#!/usr/bin/env bash
# Apache Kafka (the broker and its tools, KRaft; Kafka Streams) from Maven Central into
# .peers/kafka-<version>/libs, by the coordinates in scripts/kafka/pom.xml, and Kafka Connect's worker with
# the FileStream connectors into .peers/kafka-connect-<version>/libs, by scripts/kafka/connect/pom.xml (its
# own version: see there), idempotently: each stamp .complete holds its pom's digest, so a changed pom
# installs again. Java 17 and Maven are Debian's (installed as root when missing). Used by
# `raftlog bench perf --compare kafka` and the tests that run Kafka (and a Connect worker, and a Kafka
# Streams application) beside raftlog.
set -euo pipefail
cd "$(dirname "$0")/../.."

# install POM PROPERTY NAME JAR...: the pom's dependencies into .peers/NAME-<its PROPERTY>/libs, then
# check that each JAR (a name with VERSION standing for the version) is there
install() {
    local pom=$1 property=$2 name=$3
    shift 3
    local version libs digest
    version=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$pom")
    libs=.peers/$name-$version/libs
    digest=$(sha256sum "$pom" | cut -c1-16)
    if [ "$(cat "$libs/.complete" 2>/dev/null)" = "$digest" ]; then
        return 0
    fi
    . scripts/debian_tool.sh
    debian_tool "kafka install" java openjdk-17-jre-headless
    debian_tool "kafka install" mvn maven
    echo "kafka install: $name $version from Maven Central into $libs (~60 MB the first time)" >&2
    rm -rf "$libs"
    mkdir -p "$libs"
    mvn -B -q -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$libs" >&2
    for jar in "$@"; do
        ls "$libs/${jar//VERSION/$version}" >/dev/null
    done
    echo "$digest" >"$libs/.complete"
}

install scripts/kafka/pom.xml kafka.version kafka kafka_2.13-VERSION.jar kafka-tools-VERSION.jar \
    kafka-streams-VERSION.jar
install scripts/kafka/connect/pom.xml connect.version kafka-connect connect-runtime-VERSION.jar \
    connect-file-VERSION.jar
