"""What a request is and what it gets back: plain objects every front end shares."""
