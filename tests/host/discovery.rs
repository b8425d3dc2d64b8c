//! Tool and hook discovery rules (shared with build.rs) and the generated registry.

use edgent::values::tool_name::{validate_hook_name, validate_tool_name};

#[test]
fn snake_case_names_are_accepted() {
    crate::install_app();
    for ok in ["get_current_time", "a", "tool2", "v2_api_call"] {
        assert!(validate_tool_name(ok).is_ok(), "{ok}");
    }
}

#[test]
fn bad_names_are_rejected_with_a_reason() {
    crate::install_app();
    for bad in [
        "GetTime",
        "get-time",
        "_private",
        "trailing_",
        "double__underscore",
        "2fast",
        "",
        "type",
        "mod",
        "héllo",
    ] {
        let err = validate_tool_name(bad).expect_err(bad).to_string();
        assert!(err.contains(bad) || bad.is_empty(), "{err}");
    }
    assert!(validate_tool_name(&"a".repeat(65)).is_err());
}

#[test]
fn the_example_tool_is_registered_with_a_schema() {
    crate::install_app();
    let registry = crate::registry().unwrap();
    assert!(registry.names().any(|n| n == "get_current_time"));
    let specs = registry.specs(["get_current_time", "no_such_tool"]);
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].parameters["type"], "object");
    assert!(!specs[0].description.is_empty());
}

#[test]
fn hook_file_names_follow_the_tool_rules_with_hook_wording() {
    crate::install_app();
    for ok in ["redact_emails", "a", "v2_filter"] {
        assert!(validate_hook_name(ok).is_ok(), "{ok}");
    }
    let err = validate_hook_name("RedactEmails").unwrap_err().to_string();
    assert!(
        err.starts_with("hook file names must be snake_case"),
        "{err}"
    );
    assert!(
        err.contains("`redact_emails.rs`") && err.contains("`RedactEmails`"),
        "{err}"
    );
    let err = validate_hook_name("match").unwrap_err().to_string();
    assert!(err.contains("cannot name a hook file"), "{err}");
    assert!(validate_hook_name(&"a".repeat(65))
        .unwrap_err()
        .message()
        .starts_with("hook name"));
    for bad in ["redact-emails", "_x", "x_", "a__b", "9a", ""] {
        assert!(validate_hook_name(bad).is_err(), "{bad}");
    }
}
