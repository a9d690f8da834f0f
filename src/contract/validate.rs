//! Input validation against the descriptor schemas: the one gate before a typed handler.
//!
//! Validators are compiled once with format checks on, because JSON Schema 2020-12 treats
//! `format` as an annotation by default and typify types enforce neither ranges nor formats.
//! Long-lived processes compile every schema at start (`Validators::new`, failing fast);
//! the one-shot `agentteam exec` compiles only the schema it uses (`Validators::lazy`).

use std::sync::OnceLock;

use serde_json::Value;

use super::borrowed::{Borrowed, BorrowedJson};
use super::catalog::{ACTIONS, ActionId, TOOLS, ToolId};
use super::error::{ActionError, ErrorCode, ErrorDetail};
use super::shape::Shape;

/// At most this many details are reported for one invalid request (the envelope's `maxItems`).
pub const MAX_DETAILS: usize = 32;
/// A detail message is cut to this many characters (the envelope's `maxLength`).
const MAX_DETAIL_MESSAGE: usize = 512;

/// One schema violation.
pub type ValidationDetail = ErrorDetail;

/// Every action's and MCP tool's input and output validator, each compiled at most once.
pub struct Validators {
    inputs: Vec<OnceLock<jsonschema::Validator>>,
    outputs: Vec<OnceLock<jsonschema::Validator>>,
    tool_inputs: Vec<OnceLock<jsonschema::Validator>>,
    tool_outputs: Vec<OnceLock<jsonschema::Validator>>,
    /// The same output schemas for a result checked as the server wrote it.
    tool_outputs_borrowed: Vec<OnceLock<jsonschema::Validator<BorrowedJson>>>,
    /// The same output schemas checked as their text is read, where a [`Shape`] can hold one.
    tool_output_shapes: Vec<OnceLock<Option<Shape>>>,
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
            let _ = catalog.outputs[index].set(compile(&key, "output", descriptor.output_schema)?);
        }
        for tool in TOOLS {
            let index = tool.id as usize;
            let _ = catalog.tool_inputs[index].set(compile(tool.name, "input", tool.input_schema)?);
            let _ =
                catalog.tool_outputs[index].set(compile(tool.name, "output", tool.output_schema)?);
            let _ = catalog.tool_outputs_borrowed[index].set(compile(
                tool.name,
                "output",
                tool.output_schema,
            )?);
            let _ = catalog.tool_output_shape(tool.id);
        }
        Ok(catalog)
    }

    /// A catalog that compiles each schema on first use (schemas are checked by the test suite).
    pub fn lazy() -> Self {
        Validators {
            inputs: ACTIONS.iter().map(|_| OnceLock::new()).collect(),
            outputs: ACTIONS.iter().map(|_| OnceLock::new()).collect(),
            tool_inputs: TOOLS.iter().map(|_| OnceLock::new()).collect(),
            tool_outputs: TOOLS.iter().map(|_| OnceLock::new()).collect(),
            tool_outputs_borrowed: TOOLS.iter().map(|_| OnceLock::new()).collect(),
            tool_output_shapes: TOOLS.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    fn input(&self, id: ActionId) -> &jsonschema::Validator {
        let descriptor = id.descriptor();
        self.inputs[id as usize].get_or_init(|| {
            compile(&id.key(), "input", descriptor.input_schema)
                .expect("descriptor schemas compile (a tested invariant)")
        })
    }

    fn output(&self, id: ActionId) -> &jsonschema::Validator {
        let descriptor = id.descriptor();
        self.outputs[id as usize].get_or_init(|| {
            compile(&id.key(), "output", descriptor.output_schema)
                .expect("descriptor schemas compile (a tested invariant)")
        })
    }

    /// Checks `input` against the action's input schema; the error names every offending path.
    pub fn validate_input(&self, id: ActionId, input: &Value) -> Result<(), ActionError> {
        let details = collect(self.input(id), input);
        if details.is_empty() {
            return Ok(());
        }
        let first = &details[0];
        let at = if first.path.is_empty() {
            "the input".to_string()
        } else {
            format!("`{}`", first.path)
        };
        Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("invalid input for `{}`: {at}: {}", id.key(), first.message),
        )
        .with_next(format!(
            "run `agentteam exec {} {} --help` for the input fields",
            id.descriptor().domain,
            id.descriptor().action
        ))
        .with_details(details))
    }

    /// The violations of `output` against the action's output schema (empty when valid).
    pub fn output_violations(&self, id: ActionId, output: &Value) -> Vec<ValidationDetail> {
        collect(self.output(id), output)
    }

    fn tool_validator(&self, id: ToolId, output: bool) -> &jsonschema::Validator {
        let tool = id.descriptor();
        let (cells, which, text) = if output {
            (&self.tool_outputs, "output", tool.output_schema)
        } else {
            (&self.tool_inputs, "input", tool.input_schema)
        };
        cells[id as usize].get_or_init(|| {
            compile(tool.name, which, text).expect("tool schemas compile (a tested invariant)")
        })
    }

    /// Checks the arguments of an MCP tool call; the error names every offending path.
    pub fn validate_tool_input(&self, id: ToolId, input: &Value) -> Result<(), ActionError> {
        let details = collect(self.tool_validator(id, false), input);
        if details.is_empty() {
            return Ok(());
        }
        let first = &details[0];
        let at = if first.path.is_empty() {
            "the arguments".to_string()
        } else {
            format!("`{}`", first.path)
        };
        let name = id.descriptor().name;
        Err(ActionError::new(
            ErrorCode::ValidationFailed,
            format!("invalid arguments for `{name}`: {at}: {}", first.message),
        )
        .with_next(format!(
            "fix the arguments to match the `inputSchema` of `{name}` in tools/list"
        ))
        .with_details(details))
    }

    /// The violations of a structured result against the tool's output schema.
    pub fn tool_output_violations(&self, id: ToolId, output: &Value) -> Vec<ValidationDetail> {
        collect(self.tool_validator(id, true), output)
    }

    /// The same check for a result read in place from the owner's text.
    pub fn tool_output_violations_in_place(
        &self,
        id: ToolId,
        output: &Borrowed<'_>,
    ) -> Vec<ValidationDetail> {
        let tool = id.descriptor();
        let validator = self.tool_outputs_borrowed[id as usize].get_or_init(|| {
            compile(tool.name, "output", tool.output_schema)
                .expect("tool schemas compile (a tested invariant)")
        });
        collect(validator, output)
    }

    /// Whether the JSON text `output` is one document with distinct keys that the tool's output
    /// schema accepts, checked as it is read: `Some(true)` is the same verdict as
    /// [`Borrowed::parse`] and [`Self::tool_output_violations_in_place`] finding nothing;
    /// anything else (`None`: the schema has no [`Shape`]) leaves the verdict to them.
    pub fn tool_output_conforms(&self, id: ToolId, output: &str) -> Option<bool> {
        self.tool_output_shape(id)
            .map(|shape| shape.accepts(output))
    }

    /// The tool's output schema as a [`Shape`], compiled on first use (`None`: it has none).
    fn tool_output_shape(&self, id: ToolId) -> Option<&Shape> {
        self.tool_output_shapes[id as usize]
            .get_or_init(|| {
                let schema: Value = serde_json::from_str(id.descriptor().output_schema)
                    .expect("tool schemas are JSON (a tested invariant)");
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
                    message: "unknown field; the input schema does not allow it".into(),
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
