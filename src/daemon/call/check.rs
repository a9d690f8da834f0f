//! Every answer checked against its output contract before it reaches a runtime: a server's,
//! whichever hop it took and whoever runs the server, and the daemon's own.
//!
//! A server's answer is checked where it lies. When the operation's output schema has a
//! [`Shape`](crate::contract::shape) and the answer is the reference envelope
//! `{"data":…,"ok":true}`, the text between the frame is checked as it is read and kept as it was
//! written, nothing built; any other answer is read into a tree once and its violations found
//! there. What is passed on has no byte below a space (JSON whitespace other than spaces is
//! written away), so a bridge can quote it without escaping anything but `"` and `\`.

use std::ops::Range;

use serde_json::Value;

use crate::client::ServerAnswer;
use crate::contract::budget::{SUCCESS_CLOSE, SUCCESS_OPEN};
use crate::contract::extension::Pinned;
use crate::contract::validate::Output;
use crate::contract::{ActionError, ValidationDetail, Validators};

/// An owner's result that passed its output contract: its JSON text (one value, no byte below a
/// space), inside the buffer it arrived in.
#[derive(Debug, Clone)]
pub struct Data {
    buffer: String,
    at: Range<usize>,
}

impl Data {
    /// `text`, the whole of it.
    pub fn owned(text: String) -> Data {
        let at = 0..text.len();
        Data { buffer: text, at }
    }

    /// The result's JSON text.
    pub fn text(&self) -> &str {
        &self.buffer[self.at.clone()]
    }

    /// The success envelope `{"data":…,"ok":true}` and a newline: the buffer itself when it is
    /// already exactly that (a reference server's answer), else written around the text.
    pub fn into_envelope(self) -> String {
        let exact = self.at.start == SUCCESS_OPEN.len()
            && self.buffer.starts_with(SUCCESS_OPEN)
            && matches!(
                self.buffer[self.at.end..].strip_prefix(SUCCESS_CLOSE),
                Some("" | "\n")
            );
        if exact {
            let mut buffer = self.buffer;
            if !buffer.ends_with('\n') {
                buffer.push('\n');
            }
            return buffer;
        }
        format!("{SUCCESS_OPEN}{}{SUCCESS_CLOSE}\n", self.text())
    }
}

/// The contract a server's answer is held to.
pub enum Contract<'a> {
    /// A built-in action's or tool's output schema.
    Builtin(Output),
    /// The output schema of `action` in the definition the runtime was launched with.
    Extension { pinned: &'a Pinned, action: &'a str },
}

/// Why an answer was not passed on.
#[derive(Debug)]
pub enum OffContract {
    /// Not the contract's success envelope at all (the client's own classification).
    Envelope(ActionError),
    /// The envelope's `data` breaks the output schema here.
    Violations(Vec<ValidationDetail>),
}

/// A server's success envelope checked against `contract`: its `data`, or why not.
pub fn server(
    validators: &Validators,
    contract: Contract<'_>,
    answer: ServerAnswer,
) -> Result<Data, OffContract> {
    if let Contract::Builtin(output) = contract
        && let Some(at) = answer.written_at()
    {
        let written = &answer.body()[at.clone()];
        // The fast path: the output schema checked as the text is read, nothing built.
        if validators.output_conforms(output, written) == Some(true)
            && !has_control_byte(written.as_bytes())
        {
            return Ok(Data {
                buffer: answer.into_body(),
                at,
            });
        }
    }
    let (document, written) = answer.data().map_err(OffContract::Envelope)?;
    let violations = match contract {
        Contract::Builtin(output) => validators.output_violations_in_place(output, &document),
        Contract::Extension { pinned, action } => {
            pinned.output_violations(action, &document.to_value())
        }
    };
    if !violations.is_empty() {
        return Err(OffContract::Violations(violations));
    }
    let text = if has_control_byte(written.as_bytes()) {
        serde_json::to_string(&document).expect("a document always serializes")
    } else {
        written.into_owned()
    };
    Ok(Data::owned(text))
}

/// A result the daemon built itself checked against `output`.
pub fn built(validators: &Validators, output: Output, result: &Value) -> Result<Data, OffContract> {
    let violations = validators.output_violations(output, result);
    if !violations.is_empty() {
        return Err(OffContract::Violations(violations));
    }
    Ok(Data::owned(
        serde_json::to_string(result).expect("a Value always serializes"),
    ))
}

/// Whether `text` holds a byte below a space: in JSON, whitespace other than spaces. Chunks
/// without an early exit inside them, so the compiler compares many bytes at once (it runs over
/// every history page).
pub fn has_control_byte(text: &[u8]) -> bool {
    text.chunks(64)
        .any(|chunk| chunk.iter().fold(false, |seen, &b| seen | (b < b' ')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ToolId;
    use crate::contract::catalog::find_action;

    /// A history page as the reference server writes its envelope, with `message` as its only
    /// message.
    fn page(message: &str) -> String {
        format!(
            r#"{{"data":{{"messages":[{message}],"target":"channel:chn_0123456789"}},"ok":true}}"#
        )
    }

    const MESSAGE: &str = r#"{"attachments":[],"authorId":"agt_0123456789","content":"hi","createdAt":"2026-12-01T02:03:04.005Z","id":"msg_0123456789","reactions":[],"target":"channel:chn_0123456789"}"#;
    const HISTORY: Output = Output::Tool(ToolId::MessageHistoryRead);

    #[test]
    fn a_servers_answer_is_checked_in_place_and_passed_on_as_written() {
        let validators = Validators::lazy();
        let body = page(MESSAGE) + "\n";
        let data = server(
            &validators,
            Contract::Builtin(HISTORY),
            ServerAnswer::new(body.clone()),
        )
        .unwrap();
        assert_eq!(
            data.text(),
            &body[SUCCESS_OPEN.len()..body.len() - SUCCESS_CLOSE.len() - 1]
        );
        assert_eq!(
            data.into_envelope(),
            body,
            "the envelope is the answer itself"
        );

        // Whitespace a bridge would have to escape: the same value, written compactly.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&body).unwrap()).unwrap();
        let data = server(
            &validators,
            Contract::Builtin(HISTORY),
            ServerAnswer::new(pretty),
        )
        .unwrap();
        assert!(!has_control_byte(data.text().as_bytes()));
        assert_eq!(
            serde_json::from_str::<Value>(data.text()).unwrap(),
            serde_json::from_str::<Value>(&body).unwrap()["data"]
        );
        let envelope: Value = serde_json::from_str(&data.into_envelope()).unwrap();
        assert_eq!(envelope, serde_json::from_str::<Value>(&body).unwrap());
    }

    /// What the output schema refuses is found whatever the envelope's form: a result that
    /// breaks it never reaches a runtime.
    #[test]
    fn a_servers_answer_that_breaks_the_output_schema_is_found() {
        let validators = Validators::lazy();
        let broken = [
            (MESSAGE.replace("msg_0123456789", "msg_x"), "/messages/0/id"),
            (
                MESSAGE.replace(r#""content":"hi""#, r#""content":"""#),
                "/messages/0/content",
            ),
            (MESSAGE.replace(r#""reactions":[],"#, ""), "/messages/0"),
            (
                MESSAGE.replace(r#""reactions":[]"#, r#""reactions":[],"extra":1"#),
                "/messages/0/extra",
            ),
            (
                MESSAGE.replace("2026-12-01T02:03:04.005Z", "yesterday"),
                "/messages/0/createdAt",
            ),
        ];
        for (message, path) in broken {
            for body in [
                page(&message),
                page(&message).replace(r#""data":"#, r#""data": "#),
            ] {
                let refused = server(
                    &validators,
                    Contract::Builtin(HISTORY),
                    ServerAnswer::new(body.clone()),
                );
                let Err(OffContract::Violations(violations)) = refused else {
                    panic!("{body}: {refused:?}");
                };
                assert!(
                    violations.iter().any(|v| v.path == path),
                    "{body}: {violations:?}"
                );
            }
        }
    }

    /// A task as the reference server writes it (its typed output, serialized by serde, the
    /// location's `kind` first) is judged on the fast path, and accepted.
    #[test]
    fn a_task_the_server_wrote_is_checked_as_it_is_read() {
        use crate::contract::types::TaskResult;
        let validators = Validators::lazy();
        let get = Output::Action(find_action("task", "get").unwrap().id);
        for location in [
            r#"{"channelId":"chn_0123456789","kind":"channel"}"#,
            r#"{"threadId":"thr_0123456789","kind":"thread"}"#,
        ] {
            let typed: TaskResult = serde_json::from_str(&format!(
                r#"{{"task":{{"id":"task_0123456789","title":"t","status":"open","location":{location},"revision":1,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}}}}"#
            ))
            .unwrap();
            let written = serde_json::to_string(&typed).unwrap();
            assert_eq!(
                validators.output_conforms(get, &written),
                Some(true),
                "{written}"
            );
            let envelope = format!("{SUCCESS_OPEN}{written}{SUCCESS_CLOSE}");
            let data = server(
                &validators,
                Contract::Builtin(get),
                ServerAnswer::new(envelope),
            )
            .unwrap();
            assert_eq!(data.text(), written);
        }
    }

    /// An action's answer is held to the action's output schema, on both paths.
    #[test]
    fn an_actions_answer_is_held_to_its_output_schema() {
        let validators = Validators::lazy();
        let get = Output::Action(find_action("task", "get").unwrap().id);
        for body in [
            r#"{"data":{"task":{"id":"nope"}},"ok":true}"#,
            r#"{"ok":true,"data":{"task":{"id":"nope"}}}"#,
            r#"{"data":{},"ok":true}"#,
        ] {
            let refused = server(
                &validators,
                Contract::Builtin(get),
                ServerAnswer::new(body.into()),
            );
            assert!(
                matches!(refused, Err(OffContract::Violations(ref v)) if !v.is_empty()),
                "{body}: {refused:?}"
            );
        }
        for body in ["", "[]", r#"{"data":{},"ok":false}"#, r#"{"ok":true}"#] {
            let refused = server(
                &validators,
                Contract::Builtin(get),
                ServerAnswer::new(body.into()),
            );
            assert!(
                matches!(refused, Err(OffContract::Envelope(_))),
                "{body}: {refused:?}"
            );
        }
    }

    #[test]
    fn an_envelope_of_another_form_is_written_again() {
        let data = Data::owned(r#"{"a":1}"#.into());
        assert_eq!(data.into_envelope(), "{\"data\":{\"a\":1},\"ok\":true}\n");
    }

    #[test]
    fn a_control_byte_is_found_anywhere_in_a_chunk() {
        assert!(!has_control_byte(b""));
        for len in [1, 63, 64, 65, 200] {
            let mut text = vec![b' '; len];
            assert!(!has_control_byte(&text), "{len}");
            for at in [0, len / 2, len - 1] {
                text[at] = b'\n';
                assert!(has_control_byte(&text), "{len} {at}");
                text[at] = 0x1f;
                assert!(has_control_byte(&text), "{len} {at}");
                text[at] = 0x7f;
                assert!(!has_control_byte(&text), "{len} {at}");
                text[at] = b' ';
            }
        }
    }
}
