//! What an extension definition must be to be recorded: the contract's rules
//! (`contract::extension::check`) and the extension host's own (each action one the host
//! implements, with its risk class and the input fields it reads); and the seed definitions of
//! `schema/extensions/`, recorded when the server opens. The operator's publish
//! (`admin_api/extensions.rs`) and the seeding apply the same [`check_publish`].

use serde_json::Value;

use super::store::{Clock, Store, StoreError};
use crate::contract::extension::{self, Definition, Reserved};

/// The seed definitions the generator checked (`schema/extensions/`).
pub const SEEDS: &str = include_str!(concat!(env!("OUT_DIR"), "/extensions.json"));

/// The host's action that reads a pull request now and keeps watching it.
pub const WATCH: &str = "watch";
/// The host's action that lists the workspace's watches of one extension.
pub const LIST: &str = "list";
/// The host's action that reads one watch (again, once its last read is old enough).
pub const GET: &str = "get";
/// The host's action that stops a watch.
pub const UNWATCH: &str = "unwatch";

/// The actions the host implements, each with the input fields it reads and its risk class.
const HOST_ACTIONS: &[(&str, &[&str], bool)] = &[
    (WATCH, &["repository", "number"], true),
    (LIST, &[], false),
    (GET, &["watchId"], false),
    (UNWATCH, &["watchId"], true),
];

/// Records each seed definition as version 1 of its extension, unless the extension exists.
pub async fn seed(store: &Store, clock: &Clock) -> Result<(), StoreError> {
    let seeds: Vec<Value> = serde_json::from_str(SEEDS).expect("the generated seeds parse");
    for definition in seeds {
        let (checked, digest) = check_publish(&definition).unwrap_or_else(|problems| {
            panic!("a seed extension breaks the rules (a tested invariant): {problems:?}")
        });
        store
            .publish_extension(
                &checked.name,
                checked.provider.as_str(),
                &definition,
                &digest,
                true,
                clock.now_ms(),
            )
            .await?;
    }
    Ok(())
}

/// The rules every recorded definition obeys: the contract's ([`extension::check`]), and the
/// host's own: each action is one it implements, with its risk class and the input fields it
/// reads. Returns the definition and its digest.
pub fn check_publish(definition: &Value) -> Result<(Definition, String), Vec<String>> {
    let checked = extension::check(definition, &Reserved::builtin())?;
    let mut problems = Vec::new();
    for action in &checked.actions {
        let Some((_, fields, mutation)) = HOST_ACTIONS.iter().find(|(n, _, _)| *n == action.action)
        else {
            problems.push(format!(
                "action `{}`: the extension host implements {} for pull request watches",
                action.action,
                HOST_ACTIONS
                    .iter()
                    .map(|(n, _, _)| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        if action.risk.is_mutation() != *mutation {
            problems.push(format!(
                "action `{}` {} side effects in the extension host",
                action.action,
                if *mutation { "has" } else { "has no" }
            ));
        }
        for field in *fields {
            let declared = action
                .input
                .pointer(&format!("/properties/{field}"))
                .is_some()
                && action
                    .input
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|v| v == field));
            if !declared {
                problems.push(format!(
                    "action `{}` must require the input field `{field}` the extension host reads",
                    action.action
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok((checked, extension::digest(definition)))
    } else {
        Err(problems)
    }
}
