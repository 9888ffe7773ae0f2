//! # projections: the log folded into bench scores and tier recommendations
//!
//! A [`Projection`] is a pure fold over the log's entries: `apply(index,
//! leaf)` takes one entry; nothing here reads a clock, touches storage or
//! speaks HTTP. Time is an argument of [`Projection::view`], and so is the
//! checkpoint the answer must be computed at, and the log's entries
//! ([`fold::Entries`]): the fold keeps sums over its window, not every
//! score, and a view reads back from the caller's log the scores that leave
//! the window; a fold that is not at exactly
//! that checkpoint (size and root) refuses to answer ([`ProjectionError::Unverified`]).
//!
//! - [`fold`]: the state and the per-task-class view (MISSION.md §5).
//! - [`rules`]: the four named promotion rules and the recommendation.
//! - [`stats`]: BCa bootstrap and Wilson intervals, checked against SciPy.
//! - [`evidence`]: the held-out statistics recomputed from cited evidence alone.
//! - [`commit`]: the per-case state committed in Merkle trees, and the
//!   decision numbers recomputed from it (completeness without replay).
//! - [`driver`]: the edge: catch a projection up from a log, checkpoint it to
//!   storage, and append a `promotion.recommended` event when asked.

#![forbid(unsafe_code)]

pub mod commit;
pub mod driver;
pub mod evidence;
pub mod fold;
pub mod rules;
pub mod stats;

pub use fold::{Projection, ProjectionError, Settings, TaskClassView};
