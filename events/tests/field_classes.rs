//! docs/EVENTS.md, "What each field reveals", against the JSON Schemas in
//! docs/schemas/: every field of every event kind, and every field of the
//! leaf record and payload around it, has exactly one row with a class
//! (`public`, `internal` or `sensitive`) and a reason, and no row names a
//! field the schema does not have.
//!
//! Paths are written as the tables write them: object fields joined with
//! `.`, array items as `[]`, map values as `.*`, such as
//! `score.failure_modes[].code` and `score.breakdown.*`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use events::model::Kind;
use serde_json::Value;

const SECTION: &str = "## What each field reveals";

/// The heading of the table for the fields every entry has.
const ENTRY_TABLE: &str = "The leaf record and the payload";

/// The leaf record around the envelope (docs/FORMAT.md §8). It has no JSON
/// Schema, so its fields are listed here; the payload's come from
/// docs/schemas/events.json.
const LEAF_RECORD: [&str; 5] = [
    "v",
    "sequenced_at",
    "envelope.payloadType",
    "envelope.signatures[].keyid",
    "envelope.signatures[].sig",
];

const CLASSES: [&str; 3] = ["public", "internal", "sensitive"];

/// How deep a schema may nest before the walk gives up (a `$ref` cycle).
const MAX_DEPTH: usize = 32;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `node`, with local references (`#/$defs/Name`) followed.
fn resolve<'a>(mut node: &'a Value, defs: &'a Value, path: &str) -> &'a Value {
    for _ in 0..MAX_DEPTH {
        let Some(target) = node.get("$ref").and_then(Value::as_str) else {
            return node;
        };
        let name = target
            .strip_prefix("#/$defs/")
            .unwrap_or_else(|| panic!("`{path}`: unsupported $ref {target}"));
        node = defs
            .get(name)
            .unwrap_or_else(|| panic!("`{path}`: $ref {target} names no $defs entry"));
    }
    panic!("`{path}`: $ref cycle");
}

/// Adds to `out` the path of every leaf field under `node`, whose own path
/// is `path` (empty for the body itself).
fn walk(node: &Value, defs: &Value, path: &str, depth: usize, out: &mut BTreeSet<String>) {
    assert!(depth < MAX_DEPTH, "`{path}`: nested too deep");
    let node = resolve(node, defs, path);
    if committed_field(node) {
        out.insert(path.to_owned());
        return;
    }
    // An optional field (a schema-3 companion): `anyOf` its schema and null.
    if let Some([some, none]) = node
        .get("anyOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        if none.get("type").and_then(Value::as_str) == Some("null") {
            return committed_paths(some, defs, path, out);
        }
    }
    // An optional field (`Option<T>`): `anyOf` of T and null, walked as T.
    if let Some([a, b]) = node
        .get("anyOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
        if null(b) || null(a) {
            let inner = if null(b) { a } else { b };
            return walk(inner, defs, path, depth + 1, out);
        }
    }
    for combinator in ["oneOf", "anyOf", "allOf"] {
        let nested = node
            .get(combinator)
            .and_then(Value::as_array)
            .is_some_and(|variants| {
                variants.iter().any(|v| {
                    let v = resolve(v, defs, path);
                    v.get("properties").is_some()
                        || v.get("items").is_some()
                        || v.get("additionalProperties").is_some_and(Value::is_object)
                })
            });
        assert!(
            !nested,
            "`{path}`: {combinator} over objects or arrays, which this test does not flatten"
        );
    }
    let mut leaf = true;
    if let Some(fields) = node.get("properties").and_then(Value::as_object) {
        leaf = false;
        for (name, field) in fields {
            let sub = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            walk(field, defs, &sub, depth + 1, out);
        }
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        leaf = false;
        walk(values, defs, &format!("{path}.*"), depth + 1, out);
    }
    if let Some(items) = node.get("items") {
        leaf = false;
        walk(items, defs, &format!("{path}[]"), depth + 1, out);
    }
    if leaf {
        assert!(!path.is_empty(), "a body schema that is not an object");
        out.insert(path.to_owned());
    }
}

/// A sensitive field of schemas 2 and 3: its value, or a `Commitment`
/// (`events::model::Sensitive`). It is one field, whichever it holds.
fn committed_field(node: &Value) -> bool {
    node.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|v| {
            v.iter()
                .any(|v| v.get("$ref").and_then(Value::as_str) == Some("#/$defs/Commitment"))
        })
}

/// The paths of a body schema's fields that may hold a commitment.
fn committed_paths(node: &Value, defs: &Value, path: &str, out: &mut BTreeSet<String>) {
    let node = resolve(node, defs, path);
    if committed_field(node) {
        out.insert(path.to_owned());
        return;
    }
    if let Some(fields) = node.get("properties").and_then(Value::as_object) {
        for (name, field) in fields {
            let sub = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            committed_paths(field, defs, &sub, out);
        }
    }
}

/// The class each row of the section gives, by (table, field).
fn classes(doc: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    let mut heading = String::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.trim_end() == SECTION {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("## ") {
            break;
        }
        if line.starts_with('#') {
            heading = heading_key(line);
            continue;
        }
        let row = cells(line);
        if line.starts_with('|') && row.len() == 3 {
            if let Some(path) = row[0].strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                out.insert((heading.clone(), path.to_owned()), row[1].to_owned());
            }
        }
    }
    out
}

/// The fields schemas 2 and 3 commit are, kind by kind, the ones the
/// published schemas let hold a commitment and the ones the ledger checks
/// disclosures for (`events::disclose`); each is classed sensitive, and
/// every sensitive field is committed (case ids, identities and workflow
/// ids by their companions, docs/PRIVACY.md "Handles").
#[test]
fn every_committed_field_is_sensitive_and_every_sensitive_field_is_committed() {
    let doc = read(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/EVENTS.md"
    )));
    let classes = classes(&doc);
    for kind in Kind::ALL {
        let file = format!(
            "{}/../docs/schemas/events/{}.json",
            env!("CARGO_MANIFEST_DIR"),
            kind.as_str()
        );
        let schema = parse(Path::new(&file));
        let defs = schema.get("$defs").unwrap_or(&Value::Null);
        let mut in_schema = BTreeSet::new();
        committed_paths(&schema, defs, "", &mut in_schema);
        let in_code: BTreeSet<String> = events::disclose::committed_paths(kind)
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(in_schema, in_code, "{}: committed fields", kind.as_str());
        for path in &in_code {
            assert_eq!(
                classes
                    .get(&(kind.as_str().to_owned(), path.clone()))
                    .map(String::as_str),
                Some("sensitive"),
                "{}: `{path}` is committed but not classed sensitive",
                kind.as_str()
            );
        }
        for ((table, path), class) in &classes {
            if table != kind.as_str() || class != "sensitive" {
                continue;
            }
            assert!(
                in_code.contains(path),
                "{table}: `{path}` is sensitive: it must be committed"
            );
        }
    }
}

/// Every field path of a kind's body schema.
fn schema_paths(schema: &Value) -> BTreeSet<String> {
    let defs = schema.get("$defs").unwrap_or(&Value::Null);
    let mut out = BTreeSet::new();
    walk(schema, defs, "", 0, &mut out);
    out
}

/// The fields every entry has: the leaf record's, and the payload's
/// (docs/schemas/events.json) as `payload.…`, with `event.body` left to
/// the kinds' own tables.
fn entry_paths(payload: &Value) -> BTreeSet<String> {
    let fields = payload
        .get("properties")
        .and_then(Value::as_object)
        .expect("events.json: properties");
    let defs = payload.get("$defs").unwrap_or(&Value::Null);
    let event = fields.get("event").expect("events.json: an `event` field");
    let variants = resolve(event, defs, "payload.event")
        .get("oneOf")
        .and_then(Value::as_array)
        .expect("events.json: `event` is one of the kinds");
    for v in variants {
        let keys: BTreeSet<&str> = v
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            BTreeSet::from(["body", "kind"]),
            "events.json: every `event` is {{kind, body}}"
        );
    }
    let mut out: BTreeSet<String> = LEAF_RECORD.into_iter().map(String::from).collect();
    for name in fields.keys().filter(|name| name.as_str() != "event") {
        out.insert(format!("payload.{name}"));
    }
    out.insert("payload.event.kind".to_owned());
    out
}

/// The cells of a table row, trimmed.
fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .trim_start_matches('|')
        .trim_end_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

/// What a heading names: its first `code span`, or else its text.
fn heading_key(line: &str) -> String {
    let text = line.trim_start_matches('#').trim();
    text.split('`').nth(1).unwrap_or(text).to_owned()
}

/// What is wrong with the `| field | class | reason |` tables of `doc`'s
/// section against `expected` (heading → field paths): one line per fault,
/// naming the table and the path. Other tables are not read.
fn check(doc: &str, expected: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut lines = doc.lines().enumerate();
    if !lines.any(|(_, line)| line.trim_end() == SECTION) {
        return vec![format!("no \"{SECTION}\" section")];
    }
    let mut problems = Vec::new();
    let mut heading = String::new();
    // Inside a table: whether it is a field table.
    let mut table: Option<bool> = None;
    // heading → path → the lines of its rows
    let mut found: BTreeMap<String, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
    for (i, line) in lines {
        let n = i + 1;
        if line.starts_with("## ") {
            break;
        }
        if line.starts_with('#') {
            heading = heading_key(line);
            table = None;
            continue;
        }
        if !line.starts_with('|') {
            table = None;
            continue;
        }
        let row = cells(line);
        let in_field_table = match table {
            Some(t) => t,
            None => {
                table = Some(row == ["field", "class", "reason"]);
                continue;
            }
        };
        let separator = row
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'));
        if !in_field_table || separator {
            continue;
        }
        if row.len() != 3 {
            problems.push(format!(
                "`{heading}`, line {n}: {} cells, not 3 (field, class, reason; no `|` inside a cell)",
                row.len()
            ));
            continue;
        }
        let Some(path) = row[0].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            problems.push(format!(
                "`{heading}`, line {n}: the field {:?} is not in backticks",
                row[0]
            ));
            continue;
        };
        if !CLASSES.contains(&row[1]) {
            problems.push(format!(
                "`{heading}`: `{path}`: class `{}` is not public, internal or sensitive",
                row[1]
            ));
        }
        if row[2].is_empty() {
            problems.push(format!("`{heading}`: `{path}`: empty reason"));
        }
        found
            .entry(heading.clone())
            .or_default()
            .entry(path.to_owned())
            .or_default()
            .push(n);
    }
    for (key, want) in expected {
        let Some(have) = found.get(key) else {
            problems.push(format!("`{key}`: no table"));
            continue;
        };
        for path in want.iter().filter(|p| !have.contains_key(*p)) {
            problems.push(format!("`{key}`: `{path}` has no row"));
        }
        for (path, at) in have {
            if !want.contains(path) {
                problems.push(format!(
                    "`{key}`: the row `{path}` (line {}) names no field of the schema",
                    at[0]
                ));
            }
            if at.len() > 1 {
                problems.push(format!(
                    "`{key}`: `{path}` has {} rows (lines {at:?})",
                    at.len()
                ));
            }
        }
    }
    for key in found.keys().filter(|k| !expected.contains_key(*k)) {
        problems.push(format!("the table `{key}` names no event kind"));
    }
    problems
}

/// Every field of every kind, as the published schemas define it, has a
/// class and a reason in docs/EVENTS.md, and every row is a real field.
#[test]
fn every_field_of_every_kind_has_a_class_and_a_reason() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/schemas/events"
    ));
    let mut expected = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let file = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if file.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let kind = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_else(|| panic!("{}: not UTF-8", file.display()))
            .to_owned();
        expected.insert(kind, schema_paths(&parse(&file)));
    }
    let schemas: BTreeSet<String> = expected.keys().cloned().collect();
    let kinds: BTreeSet<String> = Kind::ALL
        .into_iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    assert_eq!(
        schemas, kinds,
        "docs/schemas/events/ holds one schema per event kind"
    );
    let payload = parse(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/schemas/events.json"
    )));
    expected.insert(ENTRY_TABLE.to_owned(), entry_paths(&payload));
    let doc = read(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/EVENTS.md"
    )));
    let problems = check(&doc, &expected);
    assert!(
        problems.is_empty(),
        "docs/EVENTS.md, \"{SECTION}\":\n{}",
        problems.join("\n")
    );
}

/// The walk writes paths the way the tables do: a `$ref` with a sibling
/// keyword, an array of objects, a map, an array of a `oneOf` of strings.
#[test]
fn schema_paths_follow_the_table_syntax() {
    let schema: Value = serde_json::from_str(
        r##"{
            "$defs": {
                "Mode": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"mode": {"type": "string"}}
                },
                "Score": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "failure_modes": {"type": "array", "items": {"$ref": "#/$defs/Mode"}},
                        "breakdown": {"type": "object", "additionalProperties": {"type": "number"}}
                    }
                },
                "Role": {"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "const": "b"}]}
            },
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "id": {"type": "string"},
                "score": {"$ref": "#/$defs/Score", "description": "a $ref with a sibling"},
                "roles": {"type": "array", "items": {"$ref": "#/$defs/Role"}}
            }
        }"##,
    )
    .expect("test schema");
    let want: BTreeSet<String> = [
        "id",
        "roles[]",
        "score.breakdown.*",
        "score.failure_modes[].mode",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(schema_paths(&schema), want);
}

/// The check fails on each fault it exists for, naming the table and the
/// path, and reads only the field tables inside the section.
#[test]
fn the_check_names_every_fault() {
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("x.y", vec!["id", "roles[]", "score.breakdown.*"]),
        ("q.r", vec!["id"]),
    ]
    .into_iter()
    .map(|(k, paths)| {
        let paths: BTreeSet<String> = paths.into_iter().map(String::from).collect();
        (k.to_owned(), paths)
    })
    .collect();
    let doc = "\
# Events

| field | class | reason |
|---|---|---|
| `id` | public | before the section: not read |

## What each field reveals

| class | meaning |
|---|---|
| public | not a field table: not read |

#### `x.y`

| field | class | reason |
|---|---|---|
| `roles[]` | secret | a class that is not one of the three |
| `score.breakdown.*` | public |  |
| `ghost` | public | not a field of the schema |
| `ghost` | public | and a second row |
| `id` | public | a | b |

#### `z.w`

| field | class | reason |
|---|---|---|
| `a` | public | a table for no kind |

## Compatibility

| field | class | reason |
|---|---|---|
| `id` | public | after the section: not read |
";
    let problems = check(doc, &expected);
    for fault in [
        "`x.y`: `roles[]`: class `secret` is not public, internal or sensitive",
        "`x.y`: `score.breakdown.*`: empty reason",
        "4 cells, not 3",
        "`x.y`: `id` has no row",
        "`x.y`: the row `ghost` (line 19) names no field of the schema",
        "`x.y`: `ghost` has 2 rows (lines [19, 20])",
        "`q.r`: no table",
        "the table `z.w` names no event kind",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(fault)),
            "no problem says {fault:?}: {problems:#?}"
        );
    }
    assert_eq!(problems.len(), 8, "{problems:#?}");
    assert_eq!(
        check("# Events\n", &expected),
        vec![format!("no \"{SECTION}\" section")]
    );
}
