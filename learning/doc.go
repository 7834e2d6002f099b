// Package learning turns finished sessions into knowledge: the verdict of a
// session (the driver's, or inferred from what happened), and — as the
// learning issues land — outcome records, track records and lessons.
//
// Everything here is pure data and functions; callers own persistence.
package learning
