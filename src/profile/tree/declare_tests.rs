//! The declarations read as the harness reads them: each expected value below
//! is what upstream's `_sandbox_copy_declarations`,
//! `_sandbox_dependency_declarations`, `_is_harness_sandbox_copy` and
//! `_validate_dependency_binding_values` gave for the same task.

use serde_json::{json, Map, Value};

use super::declare::{
    check_dependency_binding, copy_declarations, dependency_declarations, DeclarationError,
    DependencyDeclaration,
};
use super::digests::dependency_digests;

const LIMIT: u64 = 4096;

fn task(value: Value) -> Map<String, Value> {
    value.as_object().expect("a task is an object").clone()
}

/// The first refusal of a task, copy declarations first, as `prepare` checks them.
fn refusal(value: Value) -> String {
    let task = task(value);
    let error = copy_declarations(&task, LIMIT)
        .and_then(|_| dependency_declarations(&task, LIMIT).map(|_| ()))
        .expect_err("the harness refused this task");
    error.to_string()
}

#[test]
fn copy_paths_are_read_as_posix_paths_and_kept_as_written() {
    let t = task(json!({"sandbox_copy": ["./a", "b/", "c//d", "é/ü", "x/./y", "it's"]}));
    let got = copy_declarations(&t, LIMIT).unwrap();
    assert_eq!(
        got.declarations,
        ["./a", "b/", "c//d", "é/ü", "x/./y", "it's"]
    );
    assert_eq!(got.paths, ["a", "b", "c/d", "é/ü", "x/y", "it's"]);
    assert!(!got.reads_harness());
    let absent = copy_declarations(&task(json!({})), LIMIT).unwrap();
    assert!(absent.declarations.is_empty() && absent.paths.is_empty());
}

#[test]
fn copy_overlaps_are_found_between_paths_as_read() {
    assert_eq!(
        refusal(json!({"sandbox_copy": ["a", "./a/b"]})),
        "sandbox_copy declarations overlap: a and a/b"
    );
    assert_eq!(
        refusal(json!({"sandbox_copy": ["a/", "a"]})),
        "sandbox_copy declarations overlap: a and a"
    );
    // A shared prefix of characters is not a parent.
    let t = task(json!({"sandbox_copy": ["ab", "a"]}));
    assert_eq!(copy_declarations(&t, LIMIT).unwrap().paths, ["ab", "a"]);
}

#[test]
fn copy_refusals_are_the_harness_words() {
    let not_a_list = "sandbox_copy must be a list of nonblank repository-relative paths";
    assert_eq!(refusal(json!({"sandbox_copy": ["a", 3]})), not_a_list);
    assert_eq!(refusal(json!({"sandbox_copy": null})), not_a_list);
    assert_eq!(refusal(json!({"sandbox_copy": ["a", ""]})), not_a_list);
    assert_eq!(
        refusal(json!({"sandbox_copy": ["//x"]})),
        "sandbox_copy must be a repository-relative path: '//x'"
    );
    assert_eq!(
        refusal(json!({"sandbox_copy": ["a/..b", "a/.."]})),
        "sandbox_copy must be a repository-relative path: 'a/..'"
    );
    assert_eq!(
        refusal(json!({"sandbox_copy": ["/é\t'"]})),
        "sandbox_copy must be a repository-relative path: \"/é\\t'\""
    );
    // The copy is checked before the dependencies.
    assert_eq!(
        refusal(json!({"sandbox_copy": ["/x"], "sandbox_dependencies": 5})),
        "sandbox_copy must be a repository-relative path: '/x'"
    );
}

#[test]
fn the_path_byte_limit_counts_the_path_as_read() {
    let long = format!("./{}", "a".repeat(4096));
    let t = task(json!({ "sandbox_copy": [long] }));
    assert_eq!(copy_declarations(&t, LIMIT).unwrap().paths[0].len(), 4096);
    assert_eq!(
        copy_declarations(&t, 4095),
        Err(DeclarationError::PathBytes)
    );
    assert_eq!(
        refusal(
            json!({"sandbox_dependencies": [{"source": "s", "target": format!("t/{}", "a".repeat(4095))}]})
        ),
        "sandbox_copy exceeds the path byte limit"
    );
}

#[test]
fn review_cases_are_read_from_the_harness_by_path_not_by_prefix() {
    let t = task(json!({"sandbox_copy": ["eval/workflow_bench/review_casesx"]}));
    assert!(!copy_declarations(&t, LIMIT).unwrap().reads_harness());
    let t = task(json!({"sandbox_copy": ["./eval//workflow_bench/review_cases/x/"]}));
    assert!(copy_declarations(&t, LIMIT).unwrap().reads_harness());
}

#[test]
fn dependencies_keep_their_declarations_and_read_their_paths() {
    let t = task(json!({"sandbox_dependencies": [
        {"source": "./s/", "target": "t//u"},
        {"source": "s", "target": "tt"},
    ]}));
    assert_eq!(
        dependency_declarations(&t, LIMIT).unwrap(),
        [
            DependencyDeclaration {
                source: "./s/".into(),
                target: "t//u".into(),
                source_path: "s".into(),
                target_path: "t/u".into(),
            },
            DependencyDeclaration {
                source: "s".into(),
                target: "tt".into(),
                source_path: "s".into(),
                target_path: "tt".into(),
            },
        ]
    );
    assert!(dependency_declarations(&task(json!({})), LIMIT)
        .unwrap()
        .is_empty());
}

#[test]
fn dependency_refusals_are_the_harness_words() {
    let shape = "sandbox_dependencies entries require only nonblank source and target";
    assert_eq!(
        refusal(json!({"sandbox_dependencies": null})),
        "sandbox_dependencies must be a list"
    );
    assert_eq!(
        refusal(json!({"sandbox_dependencies": [{"source": "s", "target": null}]})),
        shape
    );
    assert_eq!(
        refusal(json!({"sandbox_dependencies": [{"source": "//s", "target": "t"}]})),
        "dependency source must stay inside the repository: //s"
    );
    assert_eq!(
        refusal(json!({"sandbox_dependencies": [{"source": "a/../b", "target": "t"}]})),
        "dependency source must stay inside the repository: a/../b"
    );
    assert_eq!(
        refusal(json!({"sandbox_dependencies": [{"source": "s", "target": "/t/"}]})),
        "dependency target must stay inside the clone: /t"
    );
    // Targets overlap as read and are named as written.
    assert_eq!(
        refusal(json!({"sandbox_dependencies": [
            {"source": "s", "target": "./t/"},
            {"source": "s", "target": "t"},
        ]})),
        "sandbox dependency targets overlap: ./t/ and t"
    );
}

#[test]
fn every_refusal_has_its_own_rule() {
    let errors = [
        DeclarationError::CopyNotAList,
        DeclarationError::CopyNotRelative(String::new()),
        DeclarationError::PathBytes,
        DeclarationError::CopyOverlap(String::new(), String::new()),
        DeclarationError::DependenciesNotAList,
        DeclarationError::DependencyShape,
        DeclarationError::SourceOutside(String::new()),
        DeclarationError::TargetOutside(String::new()),
        DeclarationError::TargetsOverlap(String::new(), String::new()),
        DeclarationError::BindingChanged,
    ];
    let rules: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.rule()).collect();
    assert_eq!(rules.len(), errors.len());
}

#[test]
fn a_binding_holds_exactly_the_captured_digests() {
    let digests = dependency_digests(&[]);
    let content = digests.content.to_string();
    let manifest = digests.manifest.to_string();
    let binding = |value: Value| task(value);
    let exact = binding(json!({
        "sandbox_dependency_content_digest": content,
        "sandbox_dependency_manifest_digest": manifest,
        "other": 1,
    }));
    assert_eq!(check_dependency_binding(&exact, &digests), Ok(()));
    for wrong in [
        json!({"sandbox_dependency_content_digest": content}),
        json!({"sandbox_dependency_content_digest": content, "sandbox_dependency_manifest_digest": content}),
        json!({"sandbox_dependency_content_digest": content, "sandbox_dependency_manifest_digest": null}),
    ] {
        let error = check_dependency_binding(&binding(wrong), &digests).unwrap_err();
        assert_eq!(
            error.to_string(),
            "sandbox dependency content changed after task binding"
        );
    }
}
