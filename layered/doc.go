// Package layered is a store's state as two layers: the image the last
// checkpoint wrote (snapshot/image), served in place from its mapped
// file, and above it the changes made since, in a record.Map held in
// memory. A read looks in the changes first and then in the image; a
// scan merges the two in key order; a delete of a key the image holds
// leaves a tombstone in the changes. So a store opens by mapping its
// image and replaying the log since, and keeps in memory only what was
// written since its last checkpoint.
//
// A checkpoint freezes a view of the map (Freeze), writes the view's
// entries as the next image while the map goes on changing, and swaps
// that image in (Swap): the changes the image holds leave memory, and the
// changes made since the freeze stay, now over the new image.
//
// Entries read from the image are copies, so an entry a caller holds
// never points into a mapping, and an image closed under it changes
// nothing; a view (Clone) holds its own handle on the image, so a scan
// goes on after a swap closed the image it started on.
//
// A Map is not safe for concurrent use; its clones may be read while it
// changes, as record.Map's may.
package layered
