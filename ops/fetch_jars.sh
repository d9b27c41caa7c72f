#!/usr/bin/env bash
# Copies the runtime classpath of one Maven pom into a jar directory (used by `make jars`).
# Usage: ops/fetch_jars.sh POM_DIR OUT_DIR [extra mvn arguments]
# Writes into OUT_DIR.tmp first, so an interrupted fetch never leaves a half-filled OUT_DIR.
set -euo pipefail
pom_dir=$1 out=$2
shift 2
if ! command -v mvn >/dev/null; then
  echo "make jars: no mvn on PATH: install Maven (apt-get install maven)" >&2
  exit 1
fi
settings=${MVN_SETTINGS:-ops/maven/settings.xml}
settings_args=()
[[ -f $settings ]] && settings_args=(-s "$settings")
tmp=$out.tmp
rm -rf "$tmp" && mkdir -p "$tmp"
tmp=$(cd "$tmp" && pwd)
plugin=org.apache.maven.plugins:maven-dependency-plugin:2.8
if ! mvn -q -B "${settings_args[@]}" -f "$pom_dir/pom.xml" "$plugin:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$tmp" "$@" >"$tmp.log" 2>&1; then
  if grep -q -E "Could not (transfer|resolve)|No plugin found|Unknown ?Host|Connection refused|timed out|unreachable" \
      "$tmp.log"; then
    echo "make jars: cannot download from Maven Central (details: $tmp.log): check the network" \
      "or the proxy in ~/.m2/settings.xml, then run \`make jars\` again" >&2
  else
    echo "make jars: mvn failed on $pom_dir/pom.xml (details: $tmp.log)" >&2
  fi
  exit 1
fi
rm -rf "$out" && mv "$tmp" "$out" && rm -f "$tmp.log"
touch "$out/.stamp"
echo "make jars: $(ls "$out" | wc -l) jars in $out"
