//! The generated typed handler trait and its RegisterJSON adapter (`dispatch`).

use super::catalog::ActionId;
use super::error::{ActionResult, DispatchError};
use super::types;

include!(concat!(env!("OUT_DIR"), "/handlers.rs"));
