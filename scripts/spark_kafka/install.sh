#!/usr/bin/env bash
# Spark's own Kafka source and sink (spark-sql-kafka-0-10 and its dependencies) from Maven Central into
# .peers/spark-sql-kafka-<version>/jars, by the coordinates in scripts/spark_kafka/pom.xml, idempotently.
# A jar whose artifact pyspark already ships (scala-library, hadoop-client-*, slf4j-api, lz4-java, ...) is
# left out: Spark runs with its own, and a second copy on the class path could shadow it. What is left is
# what `spark.jars` names (raftlog_spark.spark_kafka.jars()). Java 17 and Maven: see scripts/kafka/install.sh,
# which runs first and installs them when missing. Usage: scripts/spark_kafka/install.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${1:-.venv/bin/python}
version=$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' scripts/spark_kafka/pom.xml)
jars=.peers/spark-sql-kafka-$version/jars
if [ -f "$jars/.complete" ]; then
    exit 0
fi
pyspark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
pyspark_version=$("$python" -c 'import pyspark; print(pyspark.__version__)')
if [ "$pyspark_version" != "$version" ]; then
    echo "spark-sql-kafka install: pyspark is $pyspark_version, the connector $version (the newest on Maven" \
        "Central of the same major version; see scripts/spark_kafka/pom.xml)" >&2
fi
echo "spark-sql-kafka install: spark-sql-kafka-0-10 $version from Maven Central into $jars (~10 MB)" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mvn -B -q -f scripts/spark_kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$work" >&2
rm -rf "$jars"
mkdir -p "$jars"
for jar in "$work"/*.jar; do
    name=$(basename "$jar")
    artifact=${name%-[0-9]*}  # kafka-clients-3.9.2.jar -> kafka-clients
    if compgen -G "$pyspark_jars/$artifact-[0-9]*.jar" >/dev/null; then
        continue  # pyspark ships its own
    fi
    cp "$jar" "$jars/"
done
ls "$jars"/spark-sql-kafka-0-10_2.13-"$version".jar >/dev/null
touch "$jars/.complete"
