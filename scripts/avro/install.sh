#!/usr/bin/env bash
# Apache Avro's Java library from Maven Central into .peers/avro-<version>/libs, by the coordinates in
# scripts/avro/pom.xml, idempotently: the stamp .complete holds the pom's digest, so a changed pom installs
# again. Java 17 and Maven: see scripts/kafka/install.sh, which runs first and installs them when missing.
# Used by tests/partitions/registry/test_avro_java.py (the Avro schema type against Avro's own Java).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's:.*<avro.version>\(.*\)</avro.version>.*:\1:p' scripts/avro/pom.xml)
libs=.peers/avro-$version/libs
digest=$(sha256sum scripts/avro/pom.xml | cut -c1-16)
if [ "$(cat "$libs/.complete" 2>/dev/null)" = "$digest" ]; then
    exit 0
fi
echo "avro install: Apache Avro $version (Java) from Maven Central into $libs (~5 MB the first time)" >&2
rm -rf "$libs"
mkdir -p "$libs"
mvn -B -q -f scripts/avro/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$PWD/$libs" >&2
ls "$libs"/avro-"$version".jar >/dev/null
echo "$digest" >"$libs/.complete"
