// A file of the user's where generate would write: generate must refuse
// and write nothing else.

package ring
