//! Input validation against the descriptor schemas: the one gate before a typed handler.
//!
//! Validators are compiled once with format checks on, because JSON Schema 2020-12 treats
//! `format` as an annotation by default and typify types enforce neither ranges nor formats.
//! Long-lived processes compile every schema at start (`Validators::new`, failing fast);
//! the one-shot `agentteam exec` compiles only the schema it uses (`Validators::lazy`).

use std::sync::OnceLock;

use serde_json::Value;

use super::borrowed::{Borrowed, BorrowedJson};
use super::catalog::{ACTIONS, ActionId, HUMAN_ACTIONS, HumanActionId, TOOLS, ToolId};
use super::error::{ActionError, ErrorCode, ErrorDetail};
use super::shape::Shape;

/// At most this many details are reported for one invalid request (the envelope's `maxItems`).
pub const MAX_DETAILS: usize = 32;
/// A detail message is cut to this many characters (the envelope's `maxLength`).
const MAX_DETAIL_MESSAGE: usize = 512;

/// One schema violation.
pub type ValidationDetail = ErrorDetail;

/// An output contract of the built-in catalog: what an action's or an MCP tool's owner must
/// answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Action(ActionId),
    Tool(ToolId),
}

impl Output {
    /// Every output contract, actions first.
    pub fn all() -> impl Iterator<Item = Output> {
        ACTIONS
            .iter()
            .map(|a| Output::Action(a.id))
            .chain(TOOLS.iter().map(|t| Output::Tool(t.id)))
    }

    /// `task.get`, `message_history_read`.
    pub fn name(self) -> String {
        match self {
            Output::Action(id) => id.key(),
            Output::Tool(id) => id.descriptor().name.to_string(),
        }
    }

    fn schema(self) -> &'static str {
        match self {
            Output::Action(id) => id.descriptor().output_schema,
            Output::Tool(id) => id.descriptor().output_schema,
        }
    }

    /// Its slot in [`Validators::outputs`]: actions, then tools.
    fn index(self) -> usize {
        match self {
            Output::Action(id) => id as usize,
            Output::Tool(id) => ACTIONS.len() + id as usize,
        }
    }
}

/// Every action's and MCP tool's input and output validator, each compiled at most once.
pub struct Validators {
    inputs: Vec<OnceLock<jsonschema::Validator>>,
    tool_inputs: Vec<OnceLock<jsonschema::Validator>>,
    human_inputs: Vec<OnceLock<jsonschema::Validator>>,
    /// By [`Output::index`].
    outputs: Vec<Compiled>,
}

/// One output schema, in each form an answer is checked in.
#[derive(Default)]
struct Compiled {
    /// For a result the daemon built as a `Value`.
    value: OnceLock<jsonschema::Validator>,
    /// For a result checked as its owner wrote it.
    borrowed: OnceLock<jsonschema::Validator<BorrowedJson>>,
    /// For the same, checked as its text is read, where a [`Shape`] can hold the schema.
    shape: OnceLock<Option<Shape>>,
}

/// A descriptor schema that does not compile: a defect in `schema/` that tests catch.
#[derive(Debug, thiserror::Error)]
#[error("schema of `{action}` ({which}) does not compile: {message}")]
pub struct CompileError {
    pub action: String,
    pub which: &'static str,
    pub message: String,
}

impl Validators {
    /// Compiles every descriptor's input and output schema now, failing on the first that does
    /// not compile.
    pub fn new() -> Result<Self, CompileError> {
        let catalog = Validators::lazy();
        for descriptor in ACTIONS {
            let index = descriptor.id as usize;
            let key = descriptor.id.key();
            let _ = catalog.inputs[index].set(compile(&key, "input", descriptor.input_schema)?);
        }
        for tool in TOOLS {
            let index = tool.id as usize;
            let _ = catalog.tool_inputs[index].set(compile(tool.name, "input", tool.input_schema)?);
        }
        for human in HUMAN_ACTIONS {
            let index = human.id as usize;
            let _ =
                catalog.human_inputs[index].set(compile(human.name, "input", human.input_schema)?);
        }
        for output in Output::all() {
            let compiled = &catalog.outputs[output.index()];
            let name = output.name();
            let _ = compiled
                .value
                .set(compile(&name, "output", output.schema())?);
            let _ = compiled
                .borrowed
                .set(compile(&name, "output", output.schema())?);
            let _ = catalog.shape(output);
        }
        Ok(catalog)
    }

    /// A catalog that compiles each schema on first use (schemas are checked by the test suite).
    pub fn lazy() -> Self {
        Validators {
            inputs: ACTIONS.iter().map(|_| OnceLock::new()).collect(),
            tool_inputs: TOOLS.iter().map(|_| OnceLock::new()).collect(),
            human_inputs: HUMAN_ACTIONS.iter().map(|_| OnceLock::new()).collect(),
            outputs: Output::all().map(|_| Compiled::default()).collect(),
        }
    }

    fn input(&self, id: ActionId) -> &jsonschema::Validator {
        let descriptor = id.descriptor();
        self.inputs[id as usize].get_or_init(|| {
            compile(&id.key(), "input", descriptor.input_schema)
                .expect("descriptor schemas compile (a tested invariant)")
        })
    }

    /// Checks `input` against the action's input schema; the error names every offending path.
    pub fn validate_input(&self, id: ActionId, input: &Value) -> Result<(), ActionError> {
        let details = collect(self.input(id), input);
        if details.is_empty() {
            // The action's key is text made for the refusal alone.
            return Ok(());
        }
        let descriptor = id.descriptor();
        refuse_input(details, Invalid::Input(&id.key()), || {
            format!(
                "run `agentteam exec {} {} --help` for the input fields",
                descriptor.domain, descriptor.action
            )
        })
    }

    fn tool_input(&self, id: ToolId) -> &jsonschema::Validator {
        let tool = id.descriptor();
        self.tool_inputs[id as usize].get_or_init(|| {
            compile(tool.name, "input", tool.input_schema)
                .expect("tool schemas compile (a tested invariant)")
        })
    }

    /// Checks the arguments of an MCP tool call; the error names every offending path.
    pub fn validate_tool_input(&self, id: ToolId, input: &Value) -> Result<(), ActionError> {
        let name = id.descriptor().name;
        refuse_input(
            collect(self.tool_input(id), input),
            Invalid::Arguments(name),
            || format!("fix the arguments to match the `inputSchema` of `{name}` in tools/list"),
        )
    }

    /// Checks the input of a human API action; the error names every offending path.
    pub fn validate_human_input(
        &self,
        id: HumanActionId,
        input: &Value,
    ) -> Result<(), ActionError> {
        let human = id.descriptor();
        let validator = self.human_inputs[id as usize].get_or_init(|| {
            compile(human.name, "input", human.input_schema)
                .expect("human schemas compile (a tested invariant)")
        });
        refuse_input(
            collect(validator, input),
            Invalid::Input(human.name),
            || {
                format!(
                    "fix the input to match `{}` in the human API's OpenAPI document",
                    human.name
                )
            },
        )
    }

    /// The violations of a result the daemon built against `output` (empty when valid).
    pub fn output_violations(&self, output: Output, result: &Value) -> Vec<ValidationDetail> {
        let validator = self.outputs[output.index()].value.get_or_init(|| {
            compile(&output.name(), "output", output.schema())
                .expect("descriptor schemas compile (a tested invariant)")
        });
        collect(validator, result)
    }

    /// The same check for a result read in place from its owner's text.
    pub fn output_violations_in_place(
        &self,
        output: Output,
        result: &Borrowed<'_>,
    ) -> Vec<ValidationDetail> {
        let validator = self.outputs[output.index()].borrowed.get_or_init(|| {
            compile(&output.name(), "output", output.schema())
                .expect("descriptor schemas compile (a tested invariant)")
        });
        collect(validator, result)
    }

    /// Whether the JSON text `result` is one document with distinct keys that `output` accepts,
    /// checked as it is read: `Some(true)` is the same verdict as [`Borrowed::parse`] and
    /// [`Self::output_violations_in_place`] finding nothing; anything else (`None`: the schema
    /// has no [`Shape`]) leaves the verdict to them.
    pub fn output_conforms(&self, output: Output, result: &str) -> Option<bool> {
        self.shape(output).map(|shape| shape.accepts(result))
    }

    /// The output schema as a [`Shape`], compiled on first use (`None`: it has none).
    fn shape(&self, output: Output) -> Option<&Shape> {
        self.outputs[output.index()]
            .shape
            .get_or_init(|| {
                let schema: Value = serde_json::from_str(output.schema())
                    .expect("descriptor schemas are JSON (a tested invariant)");
                Shape::compile(&schema)
            })
            .as_ref()
    }
}

/// `text` compiled for instances in the representation `F` (draft 2020-12, formats checked).
fn compile<F: jsonschema::json::Json>(
    name: &str,
    which: &'static str,
    text: &str,
) -> Result<jsonschema::Validator<F>, CompileError> {
    let error = |message: String| CompileError {
        action: name.to_string(),
        which,
        message,
    };
    let schema: Value = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
    jsonschema::options_for::<F>()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| error(e.to_string()))
}

/// What an input refusal names: an action's input or a tool's arguments.
pub(crate) enum Invalid<'a> {
    Input(&'a str),
    Arguments(&'a str),
}

/// The one refusal of an input off its schema, for built-in and extension actions and tools
/// alike: `validation_failed` naming the first offending path, every path in the details, and
/// `next` saying where the fields are described. `Ok` when there is no violation.
pub(crate) fn refuse_input(
    details: Vec<ValidationDetail>,
    invalid: Invalid<'_>,
    next: impl FnOnce() -> String,
) -> Result<(), ActionError> {
    let Some(first) = details.first() else {
        return Ok(());
    };
    let (what, name, whole) = match invalid {
        Invalid::Input(name) => ("input", name, "the input"),
        Invalid::Arguments(name) => ("arguments", name, "the arguments"),
    };
    let at = match first.path.is_empty() {
        true => whole.to_string(),
        false => format!("`{}`", first.path),
    };
    let message = format!("invalid {what} for `{name}`: {at}: {}", first.message);
    Err(ActionError::new(ErrorCode::ValidationFailed, message)
        .with_next(next())
        .with_details(details))
}

/// The message of a field the schema does not name (the path names the field).
pub const UNKNOWN_FIELD: &str = "unknown field; the schema does not allow it";

pub(crate) fn collect<'i, F: jsonschema::json::Json>(
    validator: &'i jsonschema::Validator<F>,
    value: F::Node<'i>,
) -> Vec<ValidationDetail> {
    // The common case, a valid value, without the error-collecting walk (it visits every keyword
    // to gather errors; `is_valid` stops at the first and builds none).
    if validator.is_valid(value.clone()) {
        return Vec::new();
    }
    let mut details = Vec::new();
    for e in validator.iter_errors(value) {
        // An unknown field is named by its own path, not its parent's.
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            e.kind()
        {
            for name in unexpected {
                let path = format!(
                    "{}/{}",
                    e.instance_path(),
                    name.replace('~', "~0").replace('/', "~1")
                );
                details.push(ErrorDetail {
                    path: bounded(path),
                    message: UNKNOWN_FIELD.into(),
                });
            }
            continue;
        }
        // The masked form never echoes the offending value, which may be large or private.
        details.push(ErrorDetail {
            path: bounded(e.instance_path().to_string()),
            message: bounded(e.masked().to_string()),
        });
    }
    details.truncate(MAX_DETAILS);
    details
}

/// Cuts `text` to [`MAX_DETAIL_MESSAGE`] bytes on a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_DETAIL_MESSAGE {
        let mut end = MAX_DETAIL_MESSAGE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
