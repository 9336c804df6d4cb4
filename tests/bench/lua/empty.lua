-- empty handler: the floor of a callback (pcall, the conn object, the frame string)
return {on_data = function(conn, frame) end}
