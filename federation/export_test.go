package federation

// RevocationKindAt is RevocationKind on a test clock.
var RevocationKindAt = revocationKind
