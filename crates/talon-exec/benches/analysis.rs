//! Analysis of a realistic ~10 KiB shell script (docs/BENCHMARKS.md: "Analysis of a 10 KiB
//! script: median time"). The script is generated from varied blocks: functions, pipelines,
//! loops, conditionals, here-documents, command and process substitutions, wrappers.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use talon_exec::analysis::{DenyGroups, analyze};

const BLOCKS: &[&str] = &[
    r#"#!/usr/bin/env bash
set -euo pipefail
readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_{n}() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
"#,
    r#"build_{n}() {
  local target="${1:-release}"
  log_{n} "building $target"
  if [[ "$target" == release ]]; then
    cargo build --release --locked 2>&1 | tee "build-{n}.log" | grep -E '^(warning|error)' || true
  else
    timeout 600 cargo build --all-targets
  fi
}
"#,
    r#"for crate in core fs exec store tools; do
  count=$(find "crates/$crate/src" -name '*.rs' -type f | wc -l)
  echo "$crate: $count files" >> summary-{n}.txt
done
"#,
    r#"while IFS= read -r line; do
  case "$line" in
    \#*) continue ;;
    *=*) key="${line%%=*}"; value="${line#*=}"; export "APP_{n}_$key=$value" ;;
    *) echo "ignored: $line" ;;
  esac
done < config-{n}.env
"#,
    r#"cat > notes-{n}.md <<'EOF'
# Release notes {n}
- faster analysis of $(shell) scripts
- `backticks` stay literal here
EOF
"#,
    r#"diff <(sort list-a-{n}.txt) <(sort -u list-b-{n}.txt) | sed -n 's/^> //p' | head -n 20
git log --oneline -n 10 | awk '{print $1}' | xargs -n1 git show --stat > changes-{n}.txt
"#,
    r#"check_{n}() {
  command -v jq >/dev/null 2>&1 || { echo "jq missing" >&2; return 1; }
  curl -fsS --retry 3 "https://api.example.com/v1/items?page={n}" -o items-{n}.json
  jq -r '.items[] | select(.ok) | .name' items-{n}.json | sort | uniq -c
}
"#,
    r#"if [ -d node_modules ] && [ -f package.json ]; then
  npm run lint -- --max-warnings=0 && npm test -- --coverage
elif test -f pyproject.toml; then
  python3 -m pytest -q tests/ || exit 1
else
  make -j"$(nproc)" check
fi
"#,
    r#"mapfile -t files < <(git ls-files '*.sh')
for f in "${files[@]}"; do
  bash -n "$f" && shellcheck -x "$f" || failed=$((failed + 1))
done
echo "failures: ${failed:-0}"
"#,
    r#"env RUST_LOG=debug nice -n 5 cargo run --bin server -- --port $((8000 + {n})) &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
sleep 1 && curl -s "http://example.test:$((8000 + {n}))/health" | grep -q ok
"#,
];

fn script(min_bytes: usize) -> String {
    let mut out = String::new();
    let mut n = 0usize;
    while out.len() < min_bytes {
        let block = BLOCKS[n % BLOCKS.len()];
        out.push_str(&block.replace("{n}", &n.to_string()));
        n += 1;
    }
    out
}

fn bench(c: &mut Criterion) {
    let script = script(10 * 1024);
    let analysis = analyze(&script);
    assert!(
        analysis.segments.len() > 50,
        "the script should yield many segments"
    );
    eprintln!(
        "script: {} bytes, {} segments, unknown: {:?}",
        script.len(),
        analysis.segments.len(),
        analysis.unknown
    );
    let mut group = c.benchmark_group("analysis");
    group.bench_function("analyze_10KiB", |b| b.iter(|| analyze(black_box(&script))));
    let groups = DenyGroups::default();
    group.bench_function("analyze_and_deny_10KiB", |b| {
        b.iter(|| groups.check(&analyze(black_box(&script))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
