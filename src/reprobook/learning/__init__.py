"""Learning theory in code: concept classes, learners and testers with their exact guarantees."""
