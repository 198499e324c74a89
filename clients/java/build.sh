#!/usr/bin/env bash
# Builds the Java client offline with javac and jar (Maven Central is not
# reachable from CI), against Debian's Jackson and JUnit 5 jars, and runs its
# tests against real bin/fencer nodes. Installs the JDK and the jars from apt
# when they are missing (a fresh CI machine).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
jdk=/usr/lib/jvm/java-17-openjdk-amd64/bin
jars=/usr/share/java
cp_main="$jars/jackson-databind.jar:$jars/jackson-core.jar:$jars/jackson-annotations.jar"
junit="$jars/junit-platform-console-standalone.jar"

need=()
[[ -x $jdk/javac ]] || need+=(openjdk-17-jdk-headless)
[[ -f $junit ]] || need+=(junit5)
[[ -f $jars/jackson-databind.jar ]] || need+=(libjackson2-databind-java)
if ((${#need[@]})); then
	echo "build.sh: installing ${need[*]} from apt" >&2
	sudo=""
	[[ $(id -u) -eq 0 ]] || sudo=sudo
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless junit5 libjackson2-databind-java
fi

build="$here/build"
rm -rf "$build"
mkdir -p "$build/classes" "$build/test-classes"
"$jdk/javac" -Xlint:all -Werror --release 17 -d "$build/classes" -cp "$cp_main" $(find "$here/src/main/java" -name '*.java')
"$jdk/jar" --create --file "$build/fencer-client.jar" -C "$build/classes" .
echo "build.sh: built $build/fencer-client.jar" >&2

if [[ ${FENCER_JAVA_SKIP_TESTS:-} == 1 ]]; then
	exit 0
fi
export FENCER_BIN=${FENCER_BIN:-$repo/bin/fencer}
if [[ ! -x $FENCER_BIN ]]; then
	(cd "$repo" && go build -o bin/fencer ./cmd/fencer)
fi
"$jdk/javac" -Xlint:all,-try -Werror --release 17 -d "$build/test-classes" -cp "$build/fencer-client.jar:$cp_main:$junit" \
	$(find "$here/src/test/java" -name '*.java')
# The README example is compiled and run by a test: it sits in the docs, not the sources.
export FENCER_JAVA_CP="$build/fencer-client.jar:$cp_main"
"$jdk/java" -jar "$junit" --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
	--class-path "$build/test-classes:$build/fencer-client.jar:$cp_main" --scan-class-path "$build/test-classes"
